package gateway

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"
)

// TestEvents: a status write tells, as Warning events, of the problems
// it newly says (a listener's port taken, a route's backend missing),
// once; a status that stays says nothing again.
func TestEvents(t *testing.T) {
	s := baseSnapshot()
	s.heldPorts[80] = "app/lb"
	g := gw("app", "g", 0, httpListener("http", 80, gatewayv1.NamespacesFromSame, ""))
	r := httpRoute("app", "r", 0, parent("app", "g"), nil, ruleTo("missing", 8080))
	s.gateways, s.routes = []*gatewayv1.Gateway{g}, []*gatewayv1.HTTPRoute{r}
	m := build(s)

	recorder := record.NewFakeRecorder(10)
	c := &controller{gw: gatewayfake.NewSimpleClientset(), recorder: recorder}
	ctx := context.Background()
	// Created, not given to the fake: it would file them under another
	// version of their kinds.
	if _, err := c.gw.GatewayV1().Gateways("app").Create(ctx, g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.gw.GatewayV1().HTTPRoutes("app").Create(ctx, r, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	write := func() {
		t.Helper()
		g, err := c.gw.GatewayV1().Gateways("app").Get(ctx, "g", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.writeGateway(ctx, g, m.gateways[types.NamespacedName{Namespace: "app", Name: "g"}]); err != nil {
			t.Fatal(err)
		}
		r, err := c.gw.GatewayV1().HTTPRoutes("app").Get(ctx, "r", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range writeRoutes(ctx, c.recorder, m, kindHTTPRoute, []*gatewayv1.HTTPRoute{r},
			func(r *gatewayv1.HTTPRoute) *gatewayv1.RouteStatus { return &r.Status.RouteStatus },
			func(ctx context.Context, r *gatewayv1.HTTPRoute) error {
				_, err := c.gw.GatewayV1().HTTPRoutes(r.Namespace).UpdateStatus(ctx, r, metav1.UpdateOptions{})
				return err
			}) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	write()
	var events []string
	for len(recorder.Events) > 0 {
		events = append(events, <-recorder.Events)
	}
	want := []string{"Warning ListenersNotValid", "Warning PortUnavailable listener http: Port 80 is held by LoadBalancer Service app/lb",
		"Warning NotAllowedByListeners parent Gateway g", "Warning BackendNotFound parent Gateway g: rules[0].backendRefs[0]: Service app/missing does not exist"}
	if len(events) != len(want) {
		t.Fatalf("events %q, want %d: %q", events, len(want), want)
	}
	for i, w := range want {
		if !strings.HasPrefix(events[i], w) {
			t.Errorf("event %d: %q, want %q...", i, events[i], w)
		}
	}
	write()
	if len(recorder.Events) != 0 {
		t.Errorf("a status that stays told again: %q", <-recorder.Events)
	}
}

// TestEnsureGatewayClassRace: servers starting together both find no
// GatewayClass; the one whose create loses reads the winner's, and a
// conflict writing its status is the other's write, not a failure.
func TestEnsureGatewayClassRace(t *testing.T) {
	gw := gatewayfake.NewSimpleClientset()
	ctx := context.Background()
	gets := 0
	gw.PrependReactor("get", "gatewayclasses", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if gets++; gets == 1 {
			// The other server creates it between this get and create.
			if err := gw.Tracker().Create(gatewayv1.SchemeGroupVersion.WithResource("gatewayclasses"), kubebootClass(), ""); err != nil {
				t.Fatal(err)
			}
			return true, nil, apierrors.NewNotFound(gatewayv1.Resource("gatewayclasses"), ClassName)
		}
		return false, nil, nil
	})
	gw.PrependReactor("update", "gatewayclasses", func(action k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(gatewayv1.Resource("gatewayclasses"), ClassName, nil)
	})
	if err := ensureGatewayClass(ctx, gw, *NewOptions()); err != nil {
		t.Errorf("a GatewayClass another server created first: %v", err)
	}
	if gets != 2 {
		t.Errorf("%d gets, want the winner's read after the create that lost", gets)
	}
}
