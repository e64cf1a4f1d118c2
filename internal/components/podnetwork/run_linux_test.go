package podnetwork

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckCNIConf(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, wantErr string
	}{
		{name: "an existing directory", path: filepath.Join(dir, "10-flannel.conflist")},
		{name: "directories to make", path: filepath.Join(dir, "a", "b", "10-flannel.conflist")},
		{name: "under a file", path: filepath.Join(file, "net.d", "10-flannel.conflist"), wantErr: "is not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckCNIConf(tc.path)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "--flannel-cni-conf")) {
				t.Errorf("CheckCNIConf(%s) = %v, want an error saying %q", tc.path, err, tc.wantErr)
			}
			if _, err := os.Stat(filepath.Dir(tc.path)); tc.path != filepath.Join(dir, "10-flannel.conflist") && err == nil {
				t.Errorf("the check made %s", filepath.Dir(tc.path))
			}
		})
	}
}

func TestWriteCNIConf(t *testing.T) {
	path := filepath.Join(t.TempDir(), "net.d", "10-flannel.conflist")
	if err := writeCNIConf(path, netip.MustParsePrefix("10.42.3.0/24"), 1450); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Plugins []struct {
			Type string
			MTU  int
			IPAM struct {
				Type   string
				Ranges [][]struct{ Subnet string }
			}
		}
	}
	if err := json.Unmarshal(data, &conf); err != nil {
		t.Fatal(err)
	}
	if len(conf.Plugins) != 2 || conf.Plugins[0].Type != "bridge" || conf.Plugins[0].MTU != 1450 ||
		conf.Plugins[0].IPAM.Type != "host-local" || conf.Plugins[0].IPAM.Ranges[0][0].Subnet != "10.42.3.0/24" || conf.Plugins[1].Type != "portmap" {
		t.Errorf("CNI configuration:\n%s\nwant the bridge on 10.42.3.0/24 with MTU 1450, then portmap", data)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("the temporary file is left: %v", err)
	}
}
