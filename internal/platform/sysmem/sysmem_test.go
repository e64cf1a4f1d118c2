package sysmem

import (
	"os"
	"path/filepath"
	"testing"
)

func TestTotal(t *testing.T) {
	const meminfo = "MemTotal:       24596824 kB\nMemFree:        12000000 kB\n"
	const machine = 24596824 << 10
	tests := []struct {
		name  string
		files map[string]string
		want  uint64
	}{
		{"no cgroup limit, v2", map[string]string{
			"proc/self/cgroup":                    "0::/user.slice\n",
			"sys/fs/cgroup/user.slice/memory.max": "max\n",
		}, machine},
		{"a lower v2 limit", map[string]string{
			"proc/self/cgroup": "0::/system.slice/kubeboot.service\n",
			"sys/fs/cgroup/system.slice/kubeboot.service/memory.max": "8589934592\n",
		}, 8 << 30},
		{"a higher v2 limit", map[string]string{
			"proc/self/cgroup":             "0::/big\n",
			"sys/fs/cgroup/big/memory.max": "68719476736\n",
		}, machine},
		{"a v1 limit", map[string]string{
			"proc/self/cgroup": "5:devices:/\n4:memory:/docker/abc\n0::/\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "4294967296\n",
		}, 4 << 30},
		{"v1 unlimited", map[string]string{
			"proc/self/cgroup": "4:cpu,memory:/x\n",
			"sys/fs/cgroup/memory/x/memory.limit_in_bytes": "9223372036854771712\n",
		}, machine},
		{"no cgroup files", nil, machine},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			files := map[string]string{"proc/meminfo": meminfo}
			for k, v := range tt.files {
				files[k] = v
			}
			for name, content := range files {
				path := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			defer func(r string) { Root = r }(Root)
			Root = root
			if got := Total(); got != tt.want {
				t.Errorf("Total() = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestTotalHere reads this machine's files: some memory, and no more
// than its MemTotal.
func TestTotalHere(t *testing.T) {
	total, machine := Total(), memTotal()
	if machine < 256<<20 || total == 0 || total > machine {
		t.Errorf("Total() = %d with MemTotal %d", total, machine)
	}
}
