package version

import (
	"regexp"
	"testing"
)

func TestGet(t *testing.T) {
	info := Get()
	if info.Major != "1" || info.Minor == "" {
		t.Errorf("major/minor = %q/%q, want 1/<minor>", info.Major, info.Minor)
	}
	semver := regexp.MustCompile(`^v1\.\d+\.\d+\+kubeboot\.\d+\.\d+\.\d+$`)
	if !semver.MatchString(info.GitVersion) {
		t.Errorf("gitVersion %q is not a semver with kubeboot build metadata", info.GitVersion)
	}
	if info.GitVersion != "v"+Kube()+"+kubeboot."+Kubeboot {
		t.Errorf("gitVersion %q does not carry the served Kubernetes version %q", info.GitVersion, Kube())
	}
}
