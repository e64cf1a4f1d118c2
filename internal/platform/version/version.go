// Package version reports kubeboot's version in the form kube-apiserver
// serves at /version: the Kubernetes API level comes from the k8s.io
// libraries kubeboot is built with (k8s.io/apiserver v0.37.2 serves the
// 1.37.2 API), kubeboot's own release rides in the semver build metadata.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	apimachineryversion "k8s.io/apimachinery/pkg/version"
)

// Kubeboot is this release of kubeboot.
const Kubeboot = "0.1.0"

// Set at link time by release builds:
//
//	-ldflags "-X github.com/kubeboot/kubeboot/internal/platform/version.gitCommit=$(git rev-parse HEAD)
//	          -X github.com/kubeboot/kubeboot/internal/platform/version.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
//
// Without them, the commit comes from the Go toolchain's VCS stamp when
// present.
var (
	gitCommit    string
	gitTreeState string
	buildDate    string
)

// fallbackKube is used only when build information is unavailable (for
// example in some test binaries): the API level this tree pins in go.mod.
const fallbackKube = "1.37.2"

// Get returns the version information served at /version.
func Get() apimachineryversion.Info {
	kube := kubeVersion()
	parts := strings.SplitN(kube, ".", 3)
	commit, treeState, date := gitCommit, gitTreeState, buildDate
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if commit == "" {
					commit = s.Value
				}
			case "vcs.modified":
				if treeState == "" {
					if s.Value == "true" {
						treeState = "dirty"
					} else {
						treeState = "clean"
					}
				}
			case "vcs.time":
				if date == "" {
					date = s.Value
				}
			}
		}
	}
	return apimachineryversion.Info{
		Major:        parts[0],
		Minor:        parts[1],
		GitVersion:   fmt.Sprintf("v%s+kubeboot.%s", kube, Kubeboot),
		GitCommit:    commit,
		GitTreeState: treeState,
		BuildDate:    date,
		GoVersion:    runtime.Version(),
		Compiler:     runtime.Compiler,
		Platform:     runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// Kube returns the Kubernetes version kubeboot serves, e.g. "1.37.2".
func Kube() string { return kubeVersion() }

// kubeVersion maps the k8s.io/apiserver module version v0.X.Y to 1.X.Y.
func kubeVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return fallbackKube
	}
	for _, dep := range bi.Deps {
		if dep.Path != "k8s.io/apiserver" {
			continue
		}
		v := strings.TrimPrefix(dep.Version, "v0.")
		parts := strings.SplitN(v, ".", 2)
		if len(parts) != 2 {
			break
		}
		if _, err := strconv.Atoi(parts[0]); err != nil {
			break
		}
		patch := strings.SplitN(parts[1], "-", 2)[0]
		return "1." + parts[0] + "." + patch
	}
	return fallbackKube
}
