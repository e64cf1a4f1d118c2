#!/usr/bin/env bash
# Builds a tiny module that requires only kubeboot (for kubeboottest), as a
# user's test module would after `go get github.com/kubeboot/kubeboot`: it
# must build with no replace lines for the k8s.io modules. The one replace
# below stands in for the published version of this working tree.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

# Every staging module k8s.io/kubernetes replaces with its own tree (and
# so names at v0.0.0) must resolve to v0.37.2 in our graph: otherwise
# minimal version selection takes the oldest release a dependency names.
kube_dir="$(go -C "$root" list -m -f '{{.Dir}}' k8s.io/kubernetes)"
kube_version="$(go -C "$root" list -m -f '{{.Version}}' k8s.io/kubernetes)"
staging_version="v0${kube_version#v1}"
bad=0
for m in $(awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' "$kube_dir/go.mod"); do
	v="$(go -C "$root" list -m -f '{{.Version}}' "$m" 2>/dev/null || true)"
	if [ -n "$v" ] && [ "$v" != "$staging_version" ]; then
		echo "verify-consumer: $m is $v in go.mod's graph, want $staging_version (require it)" >&2
		bad=1
	fi
done
[ "$bad" = 0 ] || exit 1
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
cd "$dir"
cat > go.mod <<MOD
module example.com/consumer

go $(go -C "$root" list -m -f '{{.GoVersion}}')

require github.com/kubeboot/kubeboot v0.0.0

replace github.com/kubeboot/kubeboot => $root
MOD
cat > consumer_test.go <<'GO'
package consumer

import (
	"testing"

	"github.com/kubeboot/kubeboot/kubeboottest"
	"github.com/kubeboot/kubeboot/kubeboottest/envtest"
)

func TestStart(t *testing.T) {
	_ = kubeboottest.Start
	_ = envtest.Environment{}
}
GO
go mod tidy
if grep -n 'replace' go.mod | grep -v 'github.com/kubeboot/kubeboot =>'; then
	echo "verify-consumer: go mod tidy added replace lines" >&2
	exit 1
fi
go vet ./...
echo "verify-consumer: staging modules at $staging_version; a module requiring only kubeboot builds kubeboottest and its envtest"
