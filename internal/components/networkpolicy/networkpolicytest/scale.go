// Package networkpolicytest holds the cluster a node's NetworkPolicy
// enforcer is measured at, shared by its benchmarks: the ruleset's
// (internal/components/networkpolicy) and the cluster's (bench/netpol).
package networkpolicytest

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Cluster is a cluster's Namespaces, Pods and NetworkPolicies.
type Cluster struct {
	Namespaces []*corev1.Namespace
	Pods       []*corev1.Pod
	Policies   []*networkingv1.NetworkPolicy
}

// Namespaces is how many namespaces Scale spreads its objects over.
const Namespaces = 10

// Scale is a node's share of a cluster at the scale issue 40 names: pods
// Pods on node and as many on other, in Namespaces namespaces (ns-N,
// labelled team=N%3), each labelled app=app-M and role=0|1, serving 8080
// named http, with an IP in 10.42.0.0/15 (or above, past 65,536 Pods);
// and policies policies, each selecting a tenth of its namespace's Pods,
// allowing them from the Pods of labelled namespaces on a numbered and a
// named port, and egress to 10.0.0.0/8 but a /16.
func Scale(node, other string, pods, policies int) Cluster {
	var c Cluster
	for i := range Namespaces {
		c.Namespaces = append(c.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("ns-%d", i), Labels: map[string]string{"team": fmt.Sprint(i % 3)}}})
	}
	for i := range 2 * pods {
		nodeName := node
		if i >= pods {
			nodeName = other
		}
		ip := fmt.Sprintf("10.%d.%d.%d", 42+i/65536, i/256%256, i%256)
		c.Pods = append(c.Pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%Namespaces), Name: fmt.Sprintf("pod-%d", i),
				Labels: map[string]string{"app": fmt.Sprintf("app-%d", i/10%10), "role": fmt.Sprint(i % 2)}},
			Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Image: "none",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
		})
	}
	for i := range policies {
		c.Policies = append(c.Policies, &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%Namespaces), Name: fmt.Sprintf("policy-%d", i)},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app-%d", i/10%10)}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
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
			},
		})
	}
	return c
}
