// Package componentflags publishes the settings each upstream component
// in kubeboot's process runs with as that component's own command line:
// "kube-apiserver --anonymous-auth=false --authorization-mode=Node,RBAC
// ...". kube-apiserver, kube-controller-manager, kube-scheduler, etcd
// and kube-proxy have no process of their own here, so `ps` shows an
// auditor (kube-bench, an operator) only `kubeboot server`; the line is
// what ps would have shown for the upstream binary, written to a file
// in the data directory and logged at each start, as k3s logs its
// "Running kube-apiserver" lines.
package componentflags

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"
)

// DirName is the directory, in a data directory, of the components'
// command lines: one file per component, named after it.
const DirName = "flags"

// Dir is the directory of the command lines of the components run with
// the data directory dataDir.
func Dir(dataDir string) string { return filepath.Join(dataDir, DirName) }

// classified is the flag annotation upstream's /flagz hides a value for
// (a credential); its value is not written either.
const classified = "classified"

// Args returns the flags of fss as "--name=value", sorted by name, with
// the values the component runs with, but for those off by the
// component's default (empty, false or zero, and so in its own binary):
// a command line leaves them out, and "is not set" is what the CIS
// benchmark's checks read from their absence. defaults are the
// component's flags as its own binary registers them; a flag they do not
// have is left out when off. A flag registered in several sets is given
// once; deprecated and hidden flags are given too, as they still set what
// they name.
func Args(defaults []*pflag.FlagSet, fss ...*pflag.FlagSet) []string {
	def := map[string]string{}
	for _, fs := range defaults {
		fs.VisitAll(func(f *pflag.Flag) { def[f.Name] = value(f) })
	}
	seen := map[string]bool{}
	var args []string
	for _, fs := range fss {
		fs.VisitAll(func(f *pflag.Flag) {
			if seen[f.Name] {
				return
			}
			seen[f.Name] = true
			v := value(f)
			if d, ok := def[f.Name]; off(v) && (!ok || v == d) {
				return
			}
			if len(f.Annotations[classified]) > 0 {
				v = "CLASSIFIED"
			}
			args = append(args, "--"+f.Name+"="+v)
		})
	}
	slices.Sort(args)
	return args
}

// off reports whether a flag's value turns its setting off.
func off(v string) bool { return v == "" || v == "false" || v == "0" || v == "0s" }

// value is f's value as a command line gives it: a list comma-separated.
func value(f *pflag.Flag) string {
	if s, ok := f.Value.(pflag.SliceValue); ok {
		return strings.Join(s.GetSlice(), ",")
	}
	if v := f.Value.String(); v != "[]" {
		return v
	}
	return ""
}

// Sets returns the flag sets of fss in the order they were made.
func Sets(fss cliflag.NamedFlagSets) []*pflag.FlagSet {
	sets := make([]*pflag.FlagSet, 0, len(fss.Order))
	for _, name := range fss.Order {
		sets = append(sets, fss.FlagSets[name])
	}
	return sets
}

// Publish writes component's command line, "<component> <args>", to the
// file named after it in dir (readable by its owner only: the line names
// every key file) and logs it.
func Publish(dir, component string, args []string) error {
	line := strings.Join(append([]string{component}, args...), " ")
	klog.InfoS("Running "+line, "component", component)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%s's command line: %w", component, err)
	}
	tmp := filepath.Join(dir, "."+component+".tmp")
	if err := os.WriteFile(tmp, []byte(line+"\n"), 0o600); err != nil {
		return fmt.Errorf("%s's command line: %w", component, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, component)); err != nil {
		return fmt.Errorf("%s's command line: %w", component, err)
	}
	return nil
}
