#!/usr/bin/env bash
# Builds a tiny module that requires only kubeboot (for kubeboottest), as a
# user's test module would after `go get github.com/kubeboot/kubeboot`: it
# must build with no replace lines for the k8s.io modules. The one replace
# below stands in for the published version of this working tree.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
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
)

func TestStart(t *testing.T) {
	_ = kubeboottest.Start
}
GO
go mod tidy
if grep -n 'replace' go.mod | grep -v 'github.com/kubeboot/kubeboot =>'; then
	echo "verify-consumer: go mod tidy added replace lines" >&2
	exit 1
fi
go vet ./...
echo "verify-consumer: a module requiring only kubeboot builds kubeboottest"
