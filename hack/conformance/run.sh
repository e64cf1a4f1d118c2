#!/usr/bin/env bash
# Runs upstream's whole [Conformance] suite (k8s.io/kubernetes v1.37.2's
# e2e.test) on a two-node kubeboot cluster built on this machine: the
# parallel specs, then the [Serial] ones alone. Each run's junit.xml and
# e2e.log, and summary.md, go to the report directory. As root, on Debian
# (images are made from its packages), offline but for its package
# mirror and the Go module proxy.
#
#   hack/conformance/run.sh [REPORT_DIR]
#
# PROCS (default 4) sets ginkgo's parallel processes; FOCUS, a regexp,
# runs only the [Conformance] specs it matches; LABELS, a ginkgo label
# filter, runs the specs it selects instead of [Conformance]'s (upstream's
# NetworkPolicy specs: LABELS='Feature: containsAny NetworkPolicy');
# IPV6=1 runs them on an IPv6-only server --node and agent;
# AGENTLESS=1 runs them on a server that is no node and two agents
# instead of `server --node` and one agent. NETPOL runs cyclonus's
# generated NetworkPolicy cases (test/netpol) on a cluster of their own,
# after the specs if FOCUS or LABELS chooses any, else alone: all, ci, or
# cyclonus's tags, a tag after "-" leaving its cases out (all,-multi-peer);
# their report goes to REPORT_DIR/netpol. GATEWAY_API runs the Gateway
# API's conformance suite (test/gatewayapi) on a cluster of its own, after
# the others if any is asked for, else alone: its profiles, comma-separated
# (GATEWAY-HTTP,GATEWAY-GRPC,GATEWAY-TLS); its ConformanceReport goes to REPORT_DIR/gateway-api.
# CONFORMANCE_CACHE keeps the build (default ~/.cache/kubeboot/conformance).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/go/bin"

report=$(realpath -m "${1:-_output/conformance/$(date -u +%Y%m%dT%H%M%SZ)}")
cache=${CONFORMANCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeboot/conformance}

missing=()
for tool in go unshare ip nft runc gcc make apt-get dpkg-deb; do
	command -v "$tool" >/dev/null || missing+=("$tool")
done
test -x /usr/lib/cni/bridge -o -x /opt/cni/bin/bridge || missing+=("the CNI plugins (containernetworking-plugins)")
if ((${#missing[@]})); then
	echo "run.sh: missing: ${missing[*]}" >&2
	echo "  Debian: apt-get install util-linux iproute2 nftables runc containernetworking-plugins gcc make libc6-dev" >&2
	exit 2
fi
if [ "$(id -u)" != 0 ]; then
	echo "run.sh: run as root: the cluster's machines are network and mount namespaces" >&2
	exit 2
fi

mkdir -p "$report" "$cache"
echo "report: $report (progress: tail -f $report/*/e2e.log)"
status=0
if [ -n "${LABELS:-}${FOCUS:-}" ] || [ -z "${NETPOL:-}${GATEWAY_API:-}" ]; then
	args=(-conformance.report="$report" -conformance.cache="$cache")
	if [ -n "${LABELS:-}" ]; then args+=(-conformance.labels="$LABELS"); fi
	if [ -n "${FOCUS:-}" ]; then args+=(-conformance.focus="$FOCUS"); elif [ -z "${LABELS:-}" ]; then args+=(-conformance.full); fi
	if [ -n "${PROCS:-}" ]; then args+=(-conformance.procs="$PROCS"); fi
	if [ -n "${IPV6:-}" ]; then args+=(-conformance.ipv6); fi
	test=TestConformance
	if [ -n "${AGENTLESS:-}" ]; then test=TestConformanceAgentless; fi
	go test ./test/conformance -run "^$test\$" -count=1 -v -timeout 12h -args "${args[@]}" || status=$?
	test -f "$report/summary.md" && cat "$report/summary.md"
fi
if [ -n "${NETPOL:-}" ]; then
	go test ./test/netpol -run '^TestCyclonus$' -count=1 -v -timeout 12h \
		-args -netpol.cases="$NETPOL" -netpol.report="$report/netpol" -netpol.cache="$cache" || status=$?
	test -f "$report/netpol/summary.md" && cat "$report/netpol/summary.md"
fi
if [ -n "${GATEWAY_API:-}" ]; then
	go test ./test/gatewayapi -run '^TestGatewayAPIConformance$' -count=1 -v -timeout 12h \
		-args -gatewayapi.profiles="$GATEWAY_API" -gatewayapi.report="$report/gateway-api" -gatewayapi.cache="$cache" || status=$?
	test -f "$report/gateway-api/gateway-api-conformance-report.yaml" && cat "$report/gateway-api/gateway-api-conformance-report.yaml"
fi
exit "$status"
