package clusterip

import (
	"context"
	"slices"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

const (
	v4Allocated = "ipaddress.kubernetes.io/ip-family=IPv4,ipaddress.kubernetes.io/managed-by=ipallocator.k8s.io"
	v6Allocated = "ipaddress.kubernetes.io/ip-family=IPv6,ipaddress.kubernetes.io/managed-by=ipallocator.k8s.io"
)

var selectors = []string{
	v4Allocated,
	v6Allocated,
	"ipaddress.kubernetes.io/ip-family==IPv4,ipaddress.kubernetes.io/managed-by=someone-else",
	"ipaddress.kubernetes.io/ip-family=IPv4",
	"ipaddress.kubernetes.io/ip-family=IPv4,ipaddress.kubernetes.io/managed-by=ipallocator.k8s.io,x=y",
	"ipaddress.kubernetes.io/ip-family in (IPv4,IPv6),ipaddress.kubernetes.io/managed-by=ipallocator.k8s.io",
	"ipaddress.kubernetes.io/ip-family!=IPv6,ipaddress.kubernetes.io/managed-by=ipallocator.k8s.io",
	"",
}

func labelled(family, manager string, extra ...string) map[string]string {
	l := map[string]string{}
	if family != "" {
		l[networkingv1.LabelIPAddressFamily] = family
	}
	if manager != "" {
		l[networkingv1.LabelManagedBy] = manager
	}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

// TestFamilyListerAnswersAsTheLister changes IPAddresses through a client
// and, after every step, compares the FamilyInformer's answers with a
// plain lister's on the same informer.
func TestFamilyListerAnswersAsTheLister(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	plain := factory.Networking().V1().IPAddresses()
	family, err := NewFamilyInformer(plain)
	if err != nil {
		t.Fatal(err)
	}
	ips := client.NetworkingV1().IPAddresses()
	create := func(name string, l map[string]string) {
		t.Helper()
		if _, err := ips.Create(ctx, &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Present before the informer starts: they arrive in the initial list.
	create("10.0.0.1", labelled("IPv4", "ipallocator.k8s.io"))
	create("10.0.0.2", labelled("IPv4", "ipallocator.k8s.io", "x", "y"))
	factory.Start(ctx.Done())
	if !cacheSynced(ctx, family) {
		t.Fatal("informer did not sync")
	}
	compare(t, "initial list", plain.Lister(), family)

	before, _ := family.Lister().List(mustParse(t, v4Allocated))
	beforeNames := names(before)

	steps := []struct {
		name string
		do   func()
	}{
		{"adds", func() {
			create("fd00::1", labelled("IPv6", "ipallocator.k8s.io"))
			create("10.0.0.3", labelled("IPv4", "someone-else"))
			create("10.0.0.4", labelled("IPv4", ""))
			create("10.0.0.5", nil)
			create("10.0.0.6", labelled("IPv4", "ipallocator.k8s.io"))
		}},
		{"relabel to another manager", func() {
			update(ctx, t, ips, "10.0.0.1", labelled("IPv4", "someone-else"))
		}},
		{"relabel into the family", func() {
			update(ctx, t, ips, "10.0.0.4", labelled("IPv4", "ipallocator.k8s.io"))
		}},
		{"update in place", func() {
			update(ctx, t, ips, "10.0.0.6", labelled("IPv4", "ipallocator.k8s.io", "x", "z"))
		}},
		{"remove labels", func() {
			update(ctx, t, ips, "fd00::1", nil)
		}},
		{"deletes", func() {
			for _, name := range []string{"10.0.0.2", "10.0.0.3", "10.0.0.5"} {
				if err := ips.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, s := range steps {
		s.do()
		compare(t, s.name, plain.Lister(), family)
	}
	if got := names(before); !slices.Equal(got, beforeNames) {
		t.Errorf("a list handed out changed from %v to %v", beforeNames, got)
	}
}

func cacheSynced(ctx context.Context, f FamilyInformer) bool {
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return f.Informer().HasSynced(), nil
	})
	return err == nil
}

func update(ctx context.Context, t *testing.T, ips interface {
	Get(context.Context, string, metav1.GetOptions) (*networkingv1.IPAddress, error)
	Update(context.Context, *networkingv1.IPAddress, metav1.UpdateOptions) (*networkingv1.IPAddress, error)
}, name string, l map[string]string) {
	t.Helper()
	ip, err := ips.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ip.Labels = l
	if _, err := ips.Update(ctx, ip, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// compare waits until, for every selector, the FamilyInformer's lister
// answers as the plain lister does (the family lists follow events, which
// trail the informer's store by a moment).
func compare(t *testing.T, step string, plain interface {
	List(labels.Selector) ([]*networkingv1.IPAddress, error)
}, family FamilyInformer) {
	t.Helper()
	for _, selector := range selectors {
		sel := mustParse(t, selector)
		var got, want []string
		err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			w, err := plain.List(sel)
			if err != nil {
				return false, err
			}
			g, err := family.Lister().List(sel)
			if err != nil {
				return false, err
			}
			got, want = names(g), names(w)
			return slices.Equal(got, want), nil
		})
		if err != nil {
			t.Errorf("%s: %q: family List = %v, the lister's = %v", step, selector, got, want)
		}
	}
}

func mustParse(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

func names(ips []*networkingv1.IPAddress) []string {
	var out []string
	for _, ip := range ips {
		out = append(out, ip.Name+" "+labels.Set(ip.Labels).String())
	}
	slices.Sort(out)
	return out
}
