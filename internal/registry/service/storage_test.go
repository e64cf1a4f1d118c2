package service_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubeboot/kubeboot/internal/registry/service"
)

// The services registry as the apiserver serves it: the generic store
// with the allocation hooks, on c's allocators.
func newStorage(t *testing.T, c *cluster) *service.Storage {
	t.Helper()
	st, err := service.NewStorage(c.backend, scheme, c.alloc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Service.Destroy)
	return st
}

func nsContext() context.Context {
	return genericapirequest.WithNamespace(context.Background(), "default")
}

func storeCreate(t *testing.T, st *service.Storage, svc *corev1.Service) (*corev1.Service, error) {
	t.Helper()
	scheme.Default(svc)
	obj, err := st.Service.Create(nsContext(), svc, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Service), nil
}

func storeUpdate(t *testing.T, st *service.Storage, svc *corev1.Service) (*corev1.Service, error) {
	t.Helper()
	obj, _, err := st.Service.Update(nsContext(), svc.Name, rest.DefaultUpdatedObjectInfo(svc), rest.ValidateAllObjectFunc,
		rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Service), nil
}

func TestStorageCreateAndDelete(t *testing.T) {
	c := newCluster(t, defaultPorts, dualStack46...)
	st := newStorage(t, c)
	svc, err := storeCreate(t, st, newService("web", localTraffic, withPolicy(prefer)))
	if err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.ClusterIPs) != 2 || svc.Spec.Ports[0].NodePort == 0 || svc.Spec.HealthCheckNodePort == 0 {
		t.Fatalf("stored Service lacks allocations: %+v", svc.Spec)
	}
	wantIPs := slices.Clone(svc.Spec.ClusterIPs)
	slices.Sort(wantIPs)
	if got := c.heldIPs(t); !slices.Equal(got, wantIPs) {
		t.Errorf("IPs %v, want %v", got, wantIPs)
	}
	if _, _, err := st.Service.Delete(nsContext(), "web", rest.ValidateAllObjectFunc, &metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ips, ports := c.heldIPs(t), c.heldPorts(t); len(ips) != 0 || len(ports) != 0 {
		t.Errorf("after delete: IPs %v, ports %v still allocated", ips, ports)
	}
}

// The store allocates before it validates: a create that validation then
// refuses must leave nothing allocated.
func TestStorageRefusedCreateReleases(t *testing.T) {
	c := newCluster(t, defaultPorts, dualStack46...)
	st := newStorage(t, c)
	bad := newService("bad", ofType(corev1.ServiceTypeNodePort), withPolicy(dual), withClusterIPs("10.0.0.40", "fd00::40"),
		withPorts(port("http", 80, corev1.ProtocolTCP, 30080), port("http", 81, corev1.ProtocolTCP, 0))) // duplicate port name
	if _, err := storeCreate(t, st, bad); err == nil || statusOf(t, err).Code != 422 {
		t.Fatalf("create of an invalid Service = %v, want 422", err)
	}
	if ips, ports := c.heldIPs(t), c.heldPorts(t); len(ips) != 0 || len(ports) != 0 {
		t.Errorf("a refused create left IPs %v and ports %v allocated", ips, ports)
	}
}

// A Service without a valid name is refused before anything is allocated
// (an allocation records the name), with the name's own validation error.
func TestStorageBadNameRefusedBeforeAllocating(t *testing.T) {
	c := newCluster(t, defaultPorts, dualStack46...)
	st := newStorage(t, c)
	for _, tc := range []struct{ name, want string }{
		{"", "metadata.name: Required value: name or generateName is required"},
		{"Not_A_Label", `metadata.name: Invalid value: "Not_A_Label"`},
	} {
		_, err := storeCreate(t, st, newService(tc.name, ofType(corev1.ServiceTypeNodePort)))
		if err == nil || statusOf(t, err).Code != 422 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("create of a Service named %q = %v, want 422 with %q", tc.name, err, tc.want)
		}
	}
	if ips, ports := c.heldIPs(t), c.heldPorts(t); len(ips) != 0 || len(ports) != 0 {
		t.Errorf("refused creates left IPs %v and ports %v allocated", ips, ports)
	}
}

// kubectl replace of a manifest without clusterIP or nodePort keeps the
// allocated values and allocates nothing new.
func TestStorageReplaceKeepsAllocatedValues(t *testing.T) {
	c := newCluster(t, defaultPorts, dualStack46...)
	st := newStorage(t, c)
	created, err := storeCreate(t, st, newService("web", ofType(corev1.ServiceTypeNodePort), withPolicy(dual)))
	if err != nil {
		t.Fatal(err)
	}
	ipsBefore, portsBefore := c.heldIPs(t), c.heldPorts(t)
	replacement := newService("web", ofType(corev1.ServiceTypeNodePort), withPolicy(dual))
	scheme.Default(replacement)
	replacement.ResourceVersion = created.ResourceVersion
	updated, err := storeUpdate(t, st, replacement)
	if err != nil {
		t.Fatalf("replace: %v", err)
	}
	if !slices.Equal(updated.Spec.ClusterIPs, created.Spec.ClusterIPs) || updated.Spec.Ports[0].NodePort != created.Spec.Ports[0].NodePort {
		t.Errorf("replace changed allocations: %v/%d -> %v/%d", created.Spec.ClusterIPs, created.Spec.Ports[0].NodePort,
			updated.Spec.ClusterIPs, updated.Spec.Ports[0].NodePort)
	}
	if ips, ports := c.heldIPs(t), c.heldPorts(t); !slices.Equal(ips, ipsBefore) || !slices.Equal(ports, portsBefore) {
		t.Errorf("replace changed what is allocated: IPs %v -> %v, ports %v -> %v", ipsBefore, ips, portsBefore, ports)
	}
}

// Changing a Service's type (`kubectl patch -p '{"spec":{"type":...}}'`)
// leaves the fields the old type had in the request. Upstream wipes those
// the new type cannot have, when the user did not change them, and
// releases what they held (pkg/registry/core/service/strategy.go,
// dropTypeDependentFields; alloc.go, txnUpdateNodePorts and
// updateHealthCheckNodePort). The same goes for the health check port when
// only externalTrafficPolicy changes from Local.
func TestStorageTypeChangeDropsAllocatedFields(t *testing.T) {
	tests := []struct {
		name   string
		old    *corev1.Service
		change func(*corev1.Service)
		// wantIPs and wantPorts: whether the old ClusterIPs and node ports
		// are still allocated afterwards.
		wantIPs, wantPorts bool
	}{
		{name: "NodePort to ClusterIP", old: newService("s", ofType(corev1.ServiceTypeNodePort)),
			change:  func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP },
			wantIPs: true, wantPorts: false},
		{name: "LoadBalancer to ClusterIP", old: newService("s", localTraffic),
			change:  func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP },
			wantIPs: true, wantPorts: false},
		{name: "LoadBalancer to NodePort", old: newService("s", localTraffic),
			change:  func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort },
			wantIPs: true, wantPorts: true /* the health check port alone goes */},
		{name: "LoadBalancer Local to Cluster", old: newService("s", localTraffic),
			change:  func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster },
			wantIPs: true, wantPorts: true /* the health check port alone goes */},
		{name: "ClusterIP to ExternalName", old: newService("s", withPolicy(prefer)),
			change: func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeExternalName
				s.Spec.ExternalName = "example.com"
			},
			wantIPs: false, wantPorts: false},
		{name: "NodePort to ExternalName", old: newService("s", ofType(corev1.ServiceTypeNodePort)),
			change: func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeExternalName
				s.Spec.ExternalName = "example.com"
			},
			wantIPs: false, wantPorts: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, defaultPorts, dualStack46...)
			st := newStorage(t, c)
			old, err := storeCreate(t, st, tt.old.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			svc := old.DeepCopy()
			tt.change(svc)
			updated, err := storeUpdate(t, st, svc)
			if err != nil {
				t.Fatalf("changing the type: %v", err)
			}
			if updated.Spec.Type != corev1.ServiceTypeNodePort && updated.Spec.Type != corev1.ServiceTypeLoadBalancer {
				for i, p := range updated.Spec.Ports {
					if p.NodePort != 0 {
						t.Errorf("ports[%d].nodePort = %d kept on a %s Service", i, p.NodePort, updated.Spec.Type)
					}
				}
			}
			if updated.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal && updated.Spec.HealthCheckNodePort != 0 {
				t.Errorf("healthCheckNodePort %d kept without externalTrafficPolicy Local", updated.Spec.HealthCheckNodePort)
			}
			oldIPs := slices.Clone(old.Spec.ClusterIPs)
			slices.Sort(oldIPs)
			if got := c.heldIPs(t); tt.wantIPs != slices.Equal(got, oldIPs) || (!tt.wantIPs && len(got) != 0) {
				t.Errorf("IPs held %v (old %v), want them kept: %v", got, oldIPs, tt.wantIPs)
			}
			wantPorts := []int(nil)
			if tt.wantPorts {
				wantPorts = sortedUnique(nodePorts(updated)...)
			}
			if got := c.heldPorts(t); !slices.Equal(got, wantPorts) {
				t.Errorf("node ports held %v, want %v (old Service had %v and health check %d)", got, wantPorts, nodePorts(old), old.Spec.HealthCheckNodePort)
			}
		})
	}
}
