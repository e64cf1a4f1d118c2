//go:build linux

package networkpolicy

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

// scaleState is a node's share of a cluster at the scale: pods
// Pods on the node and as many on others, in 10 namespaces, and policies
// policies, each selecting a tenth of its namespace's Pods and allowing
// them from Pods of labelled namespaces on two ports (one named), and
// egress to a range but a part.
func scaleState(pods, policies int) state {
	s := state{node: node}
	for i := range 10 {
		s.namespaces = append(s.namespaces, namespace(fmt.Sprintf("ns-%d", i), map[string]string{"team": fmt.Sprint(i % 3)}))
	}
	for i := range 2 * pods {
		nodeName := node
		if i >= pods {
			nodeName = "other"
		}
		p := testPod(fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("pod-%d", i), nodeName, fmt.Sprintf("10.%d.%d.%d", 42+i/65536, i/256%256, i%256))
		p.Labels = map[string]string{"app": fmt.Sprintf("app-%d", i/10%10), "role": fmt.Sprint(i % 2)}
		s.pods = append(s.pods, p)
	}
	for i := range policies {
		np := policy(fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("policy-%d", i), fmt.Sprintf("app-%d", i/10%10), networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{in, out},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": fmt.Sprint(i % 3)}},
					PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"role": fmt.Sprint(i % 2)}},
				}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(80))}, {Port: ptr.To(intstr.FromString("http"))}},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{
				IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{fmt.Sprintf("10.%d.0.0/16", i%256)}},
			}}}},
		})
		s.policies = append(s.policies, np)
	}
	return s
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
