// Package server tests `kubeboot server` and `kubeboot agent` with real
// nodes end to end, on the built binary: the kubelet on upstream's fake CRI
// runtime or on kubeboot's containerd, the pod network across nodes,
// kube-proxy, cluster DNS, ServiceLB, Gateways and Ingresses, local storage,
// metrics and NetworkPolicy. test/controllers runs the controllers on test
// and simulated nodes.
package server

import (
	"testing"

	"github.com/kubeboot/kubeboot/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
