//go:build linux

package networkpolicy

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"

	"github.com/kubeboot/kubeboot/internal/components/networkpolicy/networkpolicytest"
)

// scaleState is a node's share of a cluster at the scale
// (networkpolicytest.Scale).
func scaleState(pods, policies int) state {
	c := networkpolicytest.Scale(node, "other", pods, policies)
	return state{node: node, pods: c.Pods, namespaces: c.Namespaces, policies: c.Policies}
}

// BenchmarkRuleset is a full resync of a node with 1,000 Pods and 100
// policies (and 1,000 Pods on other nodes): the ruleset computed, and
// written by nft into a table in a network namespace of the benchmark's
// own, replacing the previous one. It reports the script's size, its
// rules and set elements.
//
//	go test ./internal/components/networkpolicy -run '^$' -bench Ruleset -benchtime 10x
func BenchmarkRuleset(b *testing.B) {
	s := scaleState(1000, 100)
	b.Run("compute", func(b *testing.B) {
		var script string
		for b.Loop() {
			tx := knftables.NewFake(knftables.InetFamily, TableName).NewTransaction()
			ruleset(tx, s)
			script = tx.String()
		}
		b.ReportMetric(float64(len(script))/1e6, "script_MB")
		b.ReportMetric(float64(strings.Count(script, "add rule ")), "rules")
		b.ReportMetric(float64(strings.Count(script, "add element ")), "elements")
	})
	b.Run("nft", func(b *testing.B) {
		// nft runs in this thread's network namespace, which its
		// children inherit.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			b.Fatalf("a network namespace (root): %v", err)
		}
		nft, err := knftables.New(knftables.InetFamily, TableName)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			tx := nft.NewTransaction()
			ruleset(tx, s)
			if err := nft.Run(context.Background(), tx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
