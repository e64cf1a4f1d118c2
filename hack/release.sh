#!/usr/bin/env bash
# hack/release.sh [OUT_DIR] builds stripped, version-stamped kubeboot
# binaries into OUT_DIR (default _output/release), named
# kubeboot-<os>-<arch>[.exe], with their SHA256SUMS.
#
#   RELEASE_PLATFORMS  the targets, default
#                      "linux/amd64 linux/arm64 darwin/arm64 darwin/amd64 windows/amd64":
#                      every server on linux; `server` with simulated nodes
#                      and the Go harness elsewhere (the kubelet and
#                      kube-proxy refuse, naming the platform)
#   RELEASE_TRIMPATH   true (default): no build paths in the binaries
#   RELEASE_CGO_ENABLED  0 (default): static binaries
#                      CI builds linux/amd64 with both as its tests do
#                      (false, 1), on their compile cache: either differing
#                      recompiles the whole dependency graph (~15 min here)
#
# `kubeboot version` of a release binary names its commit and build date.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-_output/release}
platforms=${RELEASE_PLATFORMS:-"linux/amd64 linux/arm64 darwin/arm64 darwin/amd64 windows/amd64"}

pkg=github.com/kubeboot/kubeboot/internal/platform/version
commit=$(git rev-parse HEAD)
tree=clean
test -z "$(git status --porcelain --untracked-files=no)" || tree=dirty
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
ldflags="-s -w -X $pkg.gitCommit=$commit -X $pkg.gitTreeState=$tree -X $pkg.buildDate=$date"
# kustomize (in kubectl) without Go plugin loading: its import of package
# plugin, in a cgo build, keeps every exported method of the binary alive
# (54 MB of the stripped binary; docs/decisions.md). The tests build with
# the same tag (test/harness.BuildTags).
flags=(-tags kustomize_disable_go_plugin_support)
if [ "${RELEASE_TRIMPATH:-true}" = true ]; then
	flags+=(-trimpath)
fi

# A linux node's Pods run on containerd's own runc shim, built from the
# containerd module kubeboot links and embedded through an overlay (see
# internal/components/containerruntime/embedded/shim.go; test/harness.Build
# does the same): a shim per Pod that starts in a millisecond, not a copy
# of kubeboot.
shim=containerd-shim-runc-v2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p "$out"
rm -f "$out"/kubeboot-* "$out"/SHA256SUMS
for platform in $platforms; do
	os=${platform%/*} arch=${platform#*/}
	name=kubeboot-$os-$arch
	[ "$os" = windows ] && name=$name.exe
	export CGO_ENABLED=${RELEASE_CGO_ENABLED:-0} GOOS=$os GOARCH=$arch
	overlay=()
	if [ "$os" = linux ]; then
		echo "building $shim for $platform" >&2
		go build "${flags[@]}" -ldflags "-s -w" -o "$work/$shim-$arch" github.com/containerd/containerd/v2/cmd/$shim
		printf '{"Replace":{"%s":"%s"}}\n' "$PWD/internal/components/containerruntime/embedded/shim/$shim" "$work/$shim-$arch" > "$work/overlay-$arch.json"
		overlay=(-overlay "$work/overlay-$arch.json")
	fi
	echo "building $name" >&2
	go build "${flags[@]}" "${overlay[@]}" -ldflags "$ldflags" -o "$out/$name" ./cmd/kubeboot
	unset CGO_ENABLED GOOS GOARCH
done
(cd "$out" && sha256sum kubeboot-* > SHA256SUMS)
ls -l "$out" >&2
