package version

import (
	"fmt"
	_ "unsafe" // for go:linkname

	componentversion "k8s.io/component-base/version"
)

// Upstream's components (kube-controller-manager, kube-scheduler, and
// the kubelet and kube-proxy to come) report the version of
// k8s.io/component-base/version: on --version, at their /version, and in
// a Node's status. Kubernetes' release scripts set its variables at link
// time (-ldflags -X); left unset they say v0.0.0-master, which is what
// `go build k8s.io/kubernetes/cmd/kube-scheduler` reports. kubeboot is
// built by `go run`, `go install` and, through kubeboottest, by its users'
// `go test`: none of these can pass link flags. So this package sets the
// same variables when the program starts, to what Get reports. A rename
// upstream fails the build, not the version.
//
//go:linkname upstreamGitMajor k8s.io/component-base/version.gitMajor
var upstreamGitMajor string

//go:linkname upstreamGitMinor k8s.io/component-base/version.gitMinor
var upstreamGitMinor string

//go:linkname upstreamGitVersion k8s.io/component-base/version.gitVersion
var upstreamGitVersion string

//go:linkname upstreamGitCommit k8s.io/component-base/version.gitCommit
var upstreamGitCommit string

//go:linkname upstreamGitTreeState k8s.io/component-base/version.gitTreeState
var upstreamGitTreeState string

//go:linkname upstreamBuildDate k8s.io/component-base/version.buildDate
var upstreamBuildDate string

// This package sorts before every k8s.io package and imports only
// component-base's version of them, so this runs before any other
// package's initialization could read the version.
func init() {
	info := Get()
	upstreamGitMajor, upstreamGitMinor = info.Major, info.Minor
	upstreamGitVersion, upstreamGitCommit = info.GitVersion, info.GitCommit
	upstreamGitTreeState, upstreamBuildDate = info.GitTreeState, info.BuildDate
	// Get reads the git version from its copy made at initialization;
	// this one is valid against the variable just set.
	if err := componentversion.SetDynamicVersion(info.GitVersion); err != nil {
		panic(fmt.Sprintf("kubeboot version %q: %v", info.GitVersion, err))
	}
}
