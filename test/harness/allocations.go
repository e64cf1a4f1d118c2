package harness

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
)

// CheckAllocations compares the Services with the stored IPAddresses and
// node port bitmap.
func CheckAllocations(t testing.TB, client kubernetes.Interface, etcdClient *clientv3.Client) {
	t.Helper()
	ctx := context.Background()
	svcs, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ips, err := client.NetworkingV1().IPAddresses().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := map[string]string{}
	for _, ip := range ips.Items {
		owner[ip.Name] = ip.Spec.ParentRef.Namespace + "/" + ip.Spec.ParentRef.Name
	}
	heldIP := map[string]string{}
	heldPort := map[int32]string{}
	for _, svc := range svcs.Items {
		key := svc.Namespace + "/" + svc.Name
		for _, ip := range svc.Spec.ClusterIPs {
			if other, dup := heldIP[ip]; dup {
				t.Errorf("ClusterIP %s held by %s and %s", ip, other, key)
			}
			heldIP[ip] = key
			if owner[ip] != key {
				t.Errorf("ClusterIP %s of %s has IPAddress owner %q", ip, key, owner[ip])
			}
		}
		for _, p := range svc.Spec.Ports {
			if p.NodePort == 0 {
				continue
			}
			if other, dup := heldPort[p.NodePort]; dup {
				t.Errorf("NodePort %d held by %s and %s", p.NodePort, other, key)
			}
			heldPort[p.NodePort] = key
		}
	}
	for ip, o := range owner {
		if heldIP[ip] == "" {
			t.Errorf("IPAddress %s (for %s) is held by no Service: leaked", ip, o)
		}
	}
	stored := storedNodePorts(t, etcdClient)
	for p := range heldPort {
		if !stored[int(p)] {
			t.Errorf("NodePort %d of %s is not in the stored bitmap", p, heldPort[p])
		}
	}
	for p := range stored {
		if heldPort[int32(p)] == "" {
			t.Errorf("NodePort %d is in the stored bitmap but held by no Service: leaked", p)
		}
	}
	t.Logf("%d Services hold %d ClusterIPs and %d NodePorts", len(svcs.Items), len(heldIP), len(heldPort))
}

// storedNodePorts decodes the node port bitmap kube-apiserver's way.
func storedNodePorts(t testing.TB, etcdClient *clientv3.Client) map[int]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := etcdClient.Get(ctx, "/registry/ranges/servicenodeports")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("reading the node port bitmap: %v", err)
	}
	obj, _, err := legacyscheme.Codecs.UniversalDeserializer().Decode(resp.Kvs[0].Value, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ra := obj.(*corev1.RangeAllocation)
	base, _, _ := strings.Cut(ra.Range, "-")
	first, err := strconv.Atoi(base)
	if err != nil {
		t.Fatalf("stored node port range %q: %v", ra.Range, err)
	}
	out := map[int]bool{}
	// Data is a big-endian integer whose bit i is port base+i.
	for i := 0; i < len(ra.Data)*8; i++ {
		byteIdx := len(ra.Data) - 1 - i/8
		if ra.Data[byteIdx]&(1<<(i%8)) != 0 {
			out[first+i] = true
		}
	}
	return out
}
