// Command inits says where the package initializations of a kubeboot
// binary go: every process of the binary runs them before its command.
// It runs `GODEBUG=inittrace=1 <bin> version` and reads the import graph
// of ./cmd/kubeboot (go list), then prints
//
//   - by module: how many packages initialize, their time and the bytes
//     they allocate;
//   - by feature: what linking each of a list of packages costs on its own,
//     that is, the initializations of the packages nothing else links.
//
// docs/performance.md ("What every start costs") keeps its output.
//
//	go run ./hack/inits -bin <kubeboot binary> [-top 25]
package main

import (
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// features are the packages whose own cost is reported: kubeboot's
// components and commands that bring a library, and the libraries.
var features = []string{
	"github.com/kubeboot/kubeboot/internal/components/helmcontroller",
	"helm.sh/helm/v4/pkg/registry",
	"helm.sh/helm/v4/pkg/storage/driver",
	"github.com/kubeboot/kubeboot/internal/components/containerruntime",
	"github.com/containerd/containerd/v2/cmd/ctr/app",
	"github.com/kubeboot/kubeboot/internal/components/clusterdns",
	"sigs.k8s.io/kwok",
	"sigs.k8s.io/metrics-server",
	"github.com/flannel-io/flannel",
	"sigs.k8s.io/knftables",
	"k8s.io/kubectl/pkg/cmd",
	"k8s.io/kubernetes/cmd/kubelet/app",
	"k8s.io/kubernetes/cmd/kube-proxy/app",
	"github.com/prometheus/client_golang",
}

var initLine = regexp.MustCompile(`^init (\S+) @\S+ ms, (\S+) ms clock, (\d+) bytes, \d+ allocs$`)

type cost struct {
	n     int
	ms    float64
	bytes int64
}

func (c *cost) add(o cost) { c.n += o.n; c.ms += o.ms; c.bytes += o.bytes }

func main() {
	bin := flag.String("bin", "", "the kubeboot binary (required)")
	top := flag.Int("top", 25, "modules to list")
	flag.Parse()
	if *bin == "" {
		flag.Usage()
		os.Exit(2)
	}
	inits, err := trace(*bin)
	if err != nil {
		fail(err)
	}
	graph, err := imports()
	if err != nil {
		fail(err)
	}
	var total cost
	byModule := map[string]*cost{}
	for pkg, c := range inits {
		total.add(c)
		m := module(pkg)
		if byModule[m] == nil {
			byModule[m] = &cost{}
		}
		byModule[m].add(c)
	}
	fmt.Printf("%d package inits, %.1f ms, %.1f MB allocated\n\n", total.n, total.ms, mb(total.bytes))
	fmt.Println("| module | inits | ms | MB |\n|---|---|---|---|")
	modules := make([]string, 0, len(byModule))
	for m := range byModule {
		modules = append(modules, m)
	}
	slices.SortFunc(modules, func(a, b string) int { return cmp.Compare(byModule[b].bytes, byModule[a].bytes) })
	for _, m := range modules[:min(*top, len(modules))] {
		c := byModule[m]
		fmt.Printf("| %s | %d | %.1f | %.2f |\n", m, c.n, c.ms, mb(c.bytes))
	}
	fmt.Println("\n| linking only what this links | packages | inits | ms | MB |\n|---|---|---|---|---|")
	const root = "github.com/kubeboot/kubeboot/cmd/kubeboot"
	all := reach(graph, root, func(string) bool { return false })
	for _, f := range features {
		rest := reach(graph, root, func(p string) bool { return p == f || strings.HasPrefix(p, f+"/") })
		var own cost
		gone := 0
		for p := range all {
			if !rest[p] {
				gone++
				if c, ok := inits[p]; ok {
					own.add(c)
				}
			}
		}
		fmt.Printf("| %s | %d | %d | %.1f | %.2f |\n", strings.TrimPrefix(f, "github.com/kubeboot/kubeboot/"), gone, own.n, own.ms, mb(own.bytes))
	}
}

// trace returns each package's initialization in a run of bin.
func trace(bin string) (map[string]cost, error) {
	cmd := exec.Command(bin, "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s version: %w\n%s", bin, err, stderr.Bytes())
	}
	inits := map[string]cost{}
	for line := range strings.Lines(stderr.String()) {
		if m := initLine.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			ms, _ := strconv.ParseFloat(m[2], 64)
			n, _ := strconv.ParseInt(m[3], 10, 64)
			inits[m[1]] = cost{1, ms, n}
		}
	}
	return inits, nil
}

// imports is ./cmd/kubeboot's import graph, built with the release's tags.
func imports() (map[string][]string, error) {
	out, err := exec.Command("go", "list", "-deps", "-tags", "kustomize_disable_go_plugin_support",
		"-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./cmd/kubeboot").Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	graph := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		graph[f[0]] = f[1:]
	}
	return graph, nil
}

// reach is what root links, without the packages skip says.
func reach(graph map[string][]string, root string, skip func(string) bool) map[string]bool {
	seen := map[string]bool{}
	stack := []string{root}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[p] || skip(p) {
			continue
		}
		seen[p] = true
		stack = append(stack, graph[p]...)
	}
	return seen
}

// module is the module a package is in, near enough: its path's first
// three elements for hosts that serve repositories, two for the rest, the
// standard library as "std".
func module(pkg string) string {
	parts := strings.Split(pkg, "/")
	switch {
	case !strings.Contains(parts[0], "."):
		return "std"
	case parts[0] == "github.com" || parts[0] == "gitlab.com" || parts[0] == "golang.org":
		return strings.Join(parts[:min(3, len(parts))], "/")
	default:
		return strings.Join(parts[:min(2, len(parts))], "/")
	}
}

func mb(b int64) float64 { return float64(b) / 1e6 }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "inits:", err)
	os.Exit(1)
}
