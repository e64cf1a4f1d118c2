// Package kubelethost checks, before upstream's kubelet starts, that the
// host can run it: the kubelet 1.37 needs cgroup v2 (unless told
// --fail-cgroupv1=false) and a CRI runtime (containerd, CRI-O) listening
// on --container-runtime-endpoint. Upstream's kubelet finds out too, but
// after printing its whole configuration, or by retrying the runtime's
// socket; kubeboot says why in one line and exits.
package kubelethost

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"sigs.k8s.io/yaml"
)

// Host is where Check looks.
type Host struct {
	// CgroupRoot is the cgroup mount: /sys/fs/cgroup.
	CgroupRoot string
}

// Local is this machine.
var Local = Host{CgroupRoot: "/sys/fs/cgroup"}

// Check returns why the host cannot run the kubelet with args (its
// command line, flags and --config file read as upstream's kubelet reads
// them), or nil. Arguments the kubelet itself will refuse, and requests
// for help or the version, are left to it.
func (h Host) Check(args []string) error { return h.check(args, true) }

// CheckCgroups is Check without the runtime: for a node that starts its
// own, which checks what it needs then.
func (h Host) CheckCgroups(args []string) error { return h.check(args, false) }

func (h Host) check(args []string, runtime bool) error {
	if slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "--help" || strings.HasPrefix(a, "--version") }) {
		return nil
	}
	fset, flags, cfg, err := flagSet()
	if err != nil {
		return nil
	}
	fset.ParseErrorsAllowlist.UnknownFlags = true
	if err := fset.Parse(args); err != nil {
		return nil
	}
	endpoint, failCgroupV1 := cfg.ContainerRuntimeEndpoint, cfg.FailCgroupV1
	if flags.KubeletConfigFile != "" {
		data, err := os.ReadFile(flags.KubeletConfigFile)
		if err != nil {
			return nil
		}
		file := &kubeletconfigv1beta1.KubeletConfiguration{}
		if err := yaml.Unmarshal(data, file); err != nil {
			return nil
		}
		// Flags win over the file, as in the kubelet.
		if file.ContainerRuntimeEndpoint != "" && !fset.Changed("container-runtime-endpoint") {
			endpoint = file.ContainerRuntimeEndpoint
		}
		if file.FailCgroupV1 != nil && !fset.Changed("fail-cgroupv1") {
			failCgroupV1 = *file.FailCgroupV1
		}
	}
	var problems []string
	if failCgroupV1 && !h.cgroupV2() {
		problems = append(problems, fmt.Sprintf("%s is not cgroup v2 (the kubelet refuses cgroup v1 unless --fail-cgroupv1=false)", h.CgroupRoot))
	}
	if socket, ok := strings.CutPrefix(endpoint, "unix://"); ok && runtime {
		if info, err := os.Stat(socket); err != nil || info.Mode()&fs.ModeSocket == 0 {
			problems = append(problems, fmt.Sprintf("no CRI runtime listens on --container-runtime-endpoint %s (install and start containerd or CRI-O)", endpoint))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New("this host cannot run the kubelet: " + strings.Join(problems, "; "))
}

// ParseArgs parses args as the kubelet's command line (its flags, its
// configuration's flags and the global ones) and returns its flags, or
// the error the kubelet would give (an unknown flag, a bad value): what a
// caller that runs the kubelet later checks up front, to name the flag
// before anything starts.
func ParseArgs(args []string) (*options.KubeletFlags, error) {
	fset, flags, _, err := flagSet()
	if err != nil {
		return nil, err
	}
	if err := fset.Parse(args); err != nil {
		return nil, err
	}
	if fset.NArg() > 0 {
		return nil, fmt.Errorf("%q is not a flag (want --name=value)", fset.Args())
	}
	return flags, nil
}

// flagSet is the kubelet's command line as its command builds it: its
// flags, its configuration's flags and the global ones (-v, ...), and the
// values they parse into.
func flagSet() (*pflag.FlagSet, *options.KubeletFlags, *kubeletconfig.KubeletConfiguration, error) {
	fset := pflag.NewFlagSet("kubelet", pflag.ContinueOnError)
	fset.SetOutput(io.Discard)
	fset.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	flags := options.NewKubeletFlags()
	cfg, err := options.NewKubeletConfiguration()
	if err != nil {
		return nil, nil, nil, err
	}
	flags.AddFlags(fset)
	options.AddKubeletConfigFlags(fset, cfg)
	options.AddGlobalFlags(fset)
	return fset, flags, cfg, nil
}

// cgroupV2 reports whether CgroupRoot is a cgroup v2 (unified) mount.
func (h Host) cgroupV2() bool {
	_, err := os.Stat(filepath.Join(h.CgroupRoot, "cgroup.controllers"))
	return err == nil
}
