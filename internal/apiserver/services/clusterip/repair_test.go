package clusterip

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/kubernetes/pkg/registry/core/service/ipallocator"

	"github.com/kubeboot/kubeboot/internal/apiserver/services/repair"
)

type serviceList []corev1.Service

func (l serviceList) List(context.Context, *metainternalversion.ListOptions) (runtime.Object, error) {
	return &corev1.ServiceList{Items: l}, nil
}

func service(name string, ips ...string) corev1.Service {
	return corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIPs: ips},
	}
}

func ipAddress(ip, uid, owner string) *networkingv1.IPAddress {
	return &networkingv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{
			Name: ip, UID: types.UID(uid),
			Labels: map[string]string{
				networkingv1.LabelIPAddressFamily: string(corev1.IPv4Protocol),
				networkingv1.LabelManagedBy:       ipallocator.ControllerName,
			},
		},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: "ns", Name: owner}},
	}
}

// newClient is a fake clientset whose IPAddress deletes honour a UID
// precondition, as the registry does.
func newClient(objs ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset(objs...)
	c.PrependReactor("delete", "ipaddresses", func(a k8stesting.Action) (bool, runtime.Object, error) {
		del := a.(k8stesting.DeleteActionImpl)
		pre := del.DeleteOptions.Preconditions
		if pre == nil || pre.UID == nil {
			return false, nil, nil
		}
		cur, err := c.Tracker().Get(a.GetResource(), "", del.Name)
		if err != nil {
			return true, nil, err
		}
		if cur.(*networkingv1.IPAddress).UID != *pre.UID {
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), del.Name, nil)
		}
		return false, nil, nil
	})
	return c
}

func newRepair(services serviceList, c *fake.Clientset) (*Repair, *record.FakeRecorder) {
	recorder := record.NewFakeRecorder(100)
	cidrs := networkinglisters.NewServiceCIDRLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
	return NewRepair(services, c.NetworkingV1().IPAddresses(), []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}, cidrs, recorder), recorder
}

// owners maps each stored IPAddress to the Service it names.
func owners(t *testing.T, c *fake.Clientset) map[string]string {
	t.Helper()
	list, err := c.NetworkingV1().IPAddresses().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, ip := range list.Items {
		out[ip.Name] = ip.Spec.ParentRef.Name
	}
	return out
}

func reasons(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, strings.Fields(e)[1])
		default:
			slices.Sort(out)
			return out
		}
	}
}

func TestRepairPass(t *testing.T) {
	tests := []struct {
		name        string
		services    serviceList
		stored      []runtime.Object
		passes      int
		wantOwners  map[string]string
		wantReasons []string
	}{{
		name:        "a held IP without IPAddress gets one",
		services:    serviceList{service("a", "10.0.0.5")},
		passes:      1,
		wantOwners:  map[string]string{"10.0.0.5": "a"},
		wantReasons: []string{repair.ReasonClusterIPNotAllocated},
	}, {
		name:       "a correct IPAddress is left alone",
		services:   serviceList{service("a", "10.0.0.5")},
		stored:     []runtime.Object{ipAddress("10.0.0.5", "u1", "a")},
		passes:     3,
		wantOwners: map[string]string{"10.0.0.5": "a"},
	}, {
		name:        "an IPAddress naming a Service that does not hold it is given to the holder",
		services:    serviceList{service("a", "10.0.0.5")},
		stored:      []runtime.Object{ipAddress("10.0.0.5", "u1", "gone")},
		passes:      1,
		wantOwners:  map[string]string{"10.0.0.5": "a"},
		wantReasons: []string{repair.ReasonClusterIPNotAllocated},
	}, {
		name:        "two Services holding one IP are reported and nothing changes",
		services:    serviceList{service("a", "10.0.0.5"), service("b", "10.0.0.5")},
		stored:      []runtime.Object{ipAddress("10.0.0.5", "u1", "b")},
		passes:      1,
		wantOwners:  map[string]string{"10.0.0.5": "b"},
		wantReasons: []string{repair.ReasonClusterIPAlreadyAllocated},
	}, {
		name:       "a leak survives two passes",
		stored:     []runtime.Object{ipAddress("10.0.0.5", "u1", "gone")},
		passes:     2,
		wantOwners: map[string]string{"10.0.0.5": "gone"},
	}, {
		name:       "a leak is freed on its third pass",
		stored:     []runtime.Object{ipAddress("10.0.0.5", "u1", "gone")},
		passes:     3,
		wantOwners: map[string]string{},
	}, {
		name:        "an out-of-range IP is reported and its IPAddress kept",
		services:    serviceList{service("a", "10.9.0.5")},
		stored:      []runtime.Object{ipAddress("10.9.0.5", "u1", "a")},
		passes:      3,
		wantOwners:  map[string]string{"10.9.0.5": "a"},
		wantReasons: []string{repair.ReasonClusterIPOutOfRange, repair.ReasonClusterIPOutOfRange, repair.ReasonClusterIPOutOfRange},
	}, {
		name:        "an invalid IP is reported",
		services:    serviceList{service("a", "10.0.0.x")},
		passes:      1,
		wantOwners:  map[string]string{},
		wantReasons: []string{repair.ReasonClusterIPNotValid},
	}, {
		name:       "headless and ExternalName Services hold nothing",
		services:   serviceList{service("headless", corev1.ClusterIPNone), {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ext"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName}}},
		passes:     1,
		wantOwners: map[string]string{},
	}, {
		name: "IPAddresses of other managers are never freed",
		stored: []runtime.Object{func() runtime.Object {
			ip := ipAddress("10.0.0.5", "u1", "gone")
			ip.Labels[networkingv1.LabelManagedBy] = "other"
			return ip
		}()},
		passes:     3,
		wantOwners: map[string]string{"10.0.0.5": "gone"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(tt.stored...)
			r, recorder := newRepair(tt.services, c)
			for range tt.passes {
				if err := r.RunOnce(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if got := owners(t, c); !maps.Equal(got, tt.wantOwners) {
				t.Errorf("IPAddress owners = %v, want %v", got, tt.wantOwners)
			}
			if got := reasons(recorder); !slices.Equal(got, tt.wantReasons) {
				t.Errorf("event reasons = %v, want %v", got, tt.wantReasons)
			}
		})
	}
}

// TestRepairDeletesOnlyWhatItJudged: an IPAddress that changed hands
// between the pass's read and its delete (another apiserver released it
// and gave it to a new Service) is not deleted. Upstream's informer-based
// repair deletes by name, and so handed one IP to two Services.
func TestRepairDeletesOnlyWhatItJudged(t *testing.T) {
	c := newClient(ipAddress("10.0.0.5", "u1", "gone"))
	// After the list, the IPAddress is released and allocated again for
	// Service "new", as through another apiserver.
	c.PrependReactor("list", "ipaddresses", func(a k8stesting.Action) (bool, runtime.Object, error) {
		list := &networkingv1.IPAddressList{}
		obj, err := c.Tracker().Get(a.GetResource(), "", "10.0.0.5")
		if err != nil {
			return true, nil, err
		}
		list.Items = append(list.Items, *obj.(*networkingv1.IPAddress))
		if err := c.Tracker().Update(a.GetResource(), ipAddress("10.0.0.5", "u2", "new"), ""); err != nil {
			return true, nil, err
		}
		return true, list, nil
	})
	r, _ := newRepair(serviceList{service("stale", "10.0.0.5")}, c)
	if err := r.RunOnce(context.Background()); err == nil {
		t.Error("RunOnce succeeded; want the conflict reported")
	}
	if got := owners(t, c)["10.0.0.5"]; got != "new" {
		t.Errorf("IPAddress 10.0.0.5 owner = %q, want %q (kept)", got, "new")
	}
}

// TestRepairCountsLeakSightingsPerObject: an IPAddress replaced by another
// of the same name starts its count again.
func TestRepairCountsLeakSightingsPerObject(t *testing.T) {
	c := newClient(ipAddress("10.0.0.5", "u1", "gone"))
	r, _ := newRepair(nil, c)
	gvr := networkingv1.SchemeGroupVersion.WithResource("ipaddresses")
	for i, uid := range []string{"u1", "u1", "u2", "u2"} {
		if err := c.Tracker().Update(gvr, ipAddress("10.0.0.5", uid, "gone"), ""); err != nil {
			t.Fatal(err)
		}
		if err := r.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(owners(t, c)) != 1 {
			t.Fatalf("pass %d freed the IPAddress; no object was seen on %d passes", i+1, repair.LeakSightings)
		}
	}
}
