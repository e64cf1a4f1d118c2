package harness

import (
	"context"
	"fmt"
	"sort"
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

// allocationsSettle bounds how long CheckAllocations waits for the
// repair loops: a leak is freed on its repair.LeakSightings-th pass, a
// few seconds at the tests' 1 s interval, longer on a loaded machine.
const allocationsSettle = time.Minute

// CheckAllocations waits until the Services agree with the stored
// IPAddresses and node port bitmap (no address or port held twice, none
// held without being stored, none stored for no Service), and fails the
// test with what still disagrees after allocationsSettle. A fault test's
// killed server may leave allocations without a Service: waiting, not a
// fixed sleep, lets the repair loops free them however slow the machine.
func CheckAllocations(t testing.TB, client kubernetes.Interface, etcdClient *clientv3.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), allocationsSettle)
	defer cancel()
	start := time.Now()
	var problems []string
	var summary string
	for {
		var err error
		problems, summary, err = allocationProblems(ctx, client, etcdClient)
		if err != nil {
			t.Fatal(err)
		}
		if len(problems) == 0 {
			t.Logf("%s (in agreement after %s)", summary, time.Since(start).Round(time.Millisecond))
			return
		}
		select {
		case <-ctx.Done():
			for _, p := range problems {
				t.Error(p)
			}
			t.Logf("after %s: %s", allocationsSettle, summary)
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// allocationProblems lists where the Services and the stored allocations
// disagree, and summarizes what the Services hold.
func allocationProblems(ctx context.Context, client kubernetes.Interface, etcdClient *clientv3.Client) ([]string, string, error) {
	svcs, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, "", err
	}
	ips, err := client.NetworkingV1().IPAddresses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, "", err
	}
	var problems []string
	report := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
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
				report("ClusterIP %s held by %s and %s", ip, other, key)
			}
			heldIP[ip] = key
			if owner[ip] != key {
				report("ClusterIP %s of %s has IPAddress owner %q", ip, key, owner[ip])
			}
		}
		for _, p := range svc.Spec.Ports {
			if p.NodePort == 0 {
				continue
			}
			if other, dup := heldPort[p.NodePort]; dup {
				report("NodePort %d held by %s and %s", p.NodePort, other, key)
			}
			heldPort[p.NodePort] = key
		}
	}
	for ip, o := range owner {
		if heldIP[ip] == "" {
			report("IPAddress %s (for %s) is held by no Service: leaked", ip, o)
		}
	}
	stored, err := storedNodePorts(ctx, etcdClient)
	if err != nil {
		return nil, "", err
	}
	for p := range heldPort {
		if !stored[int(p)] {
			report("NodePort %d of %s is not in the stored bitmap", p, heldPort[p])
		}
	}
	for p := range stored {
		if heldPort[int32(p)] == "" {
			report("NodePort %d is in the stored bitmap but held by no Service: leaked", p)
		}
	}
	sort.Strings(problems)
	return problems, fmt.Sprintf("%d Services hold %d ClusterIPs and %d NodePorts", len(svcs.Items), len(heldIP), len(heldPort)), nil
}

// storedNodePorts decodes the node port bitmap kube-apiserver's way.
func storedNodePorts(ctx context.Context, etcdClient *clientv3.Client) (map[int]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := etcdClient.Get(ctx, "/registry/ranges/servicenodeports")
	if err != nil {
		return nil, fmt.Errorf("reading the node port bitmap: %w", err)
	}
	if len(resp.Kvs) != 1 {
		return nil, fmt.Errorf("reading the node port bitmap: %d keys", len(resp.Kvs))
	}
	obj, _, err := legacyscheme.Codecs.UniversalDeserializer().Decode(resp.Kvs[0].Value, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding the node port bitmap: %w", err)
	}
	ra, ok := obj.(*corev1.RangeAllocation)
	if !ok {
		return nil, fmt.Errorf("the node port bitmap is a %T", obj)
	}
	base, _, _ := strings.Cut(ra.Range, "-")
	first, err := strconv.Atoi(base)
	if err != nil {
		return nil, fmt.Errorf("stored node port range %q: %w", ra.Range, err)
	}
	out := map[int]bool{}
	// Data is a big-endian integer whose bit i is port base+i.
	for i := 0; i < len(ra.Data)*8; i++ {
		byteIdx := len(ra.Data) - 1 - i/8
		if ra.Data[byteIdx]&(1<<(i%8)) != 0 {
			out[first+i] = true
		}
	}
	return out, nil
}
