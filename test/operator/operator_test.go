package operator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/kubeboot/kubeboot/test/operator/api/v1"
	v2 "github.com/kubeboot/kubeboot/test/operator/api/v2"
)

// resetAfter returns the suite's server to its fresh state when the test
// ends, as a suite that shares one server between tests would.
func resetAfter(t *testing.T) {
	t.Cleanup(func() {
		if err := testEnv.Reset(context.Background()); err != nil {
			t.Errorf("Reset: %v", err)
		}
	})
}

func website(ns, name string, replicas int32) *v2.Website {
	return &v2.Website{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v2.WebsiteSpec{Replicas: replicas, Container: v2.Container{Image: "nginx", Port: 8080}},
	}
}

func namespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond every 50 ms for up to 30 s.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func gone(c client.Client, obj client.Object) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err), nil
	}
}

// TestValidatingWebhook: the apiserver calls the operator's validating
// webhook for v2 and, converted through the conversion webhook, for v1;
// its refusal reaches the client as a 422 with the field path.
func TestValidatingWebhook(t *testing.T) {
	resetAfter(t)
	ctx := context.Background()
	for _, obj := range []client.Object{
		website("default", "too-big", 11),
		&v1.Website{ObjectMeta: metav1.ObjectMeta{Name: "too-big-v1", Namespace: "default"}, Spec: v1.WebsiteSpec{Replicas: 11, Image: "nginx"}},
	} {
		err := k8sClient.Create(ctx, obj)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.replicas") || !strings.Contains(err.Error(), "must be at most 10") {
			t.Errorf("creating %s with 11 replicas: err = %v, want the webhook's Invalid on spec.replicas", obj.GetName(), err)
		}
	}
	if err := k8sClient.Create(ctx, website("default", "fine", 3)); err != nil {
		t.Errorf("creating a valid Website: %v", err)
	}
}

// TestConversion: a Website stored as v2 reads as v1 and back through the
// conversion webhook, and a v1 update keeps what only v2 has.
func TestConversion(t *testing.T) {
	resetAfter(t)
	ctx := context.Background()
	if err := k8sClient.Create(ctx, website("default", "converted", 2)); err != nil {
		t.Fatal(err)
	}
	// The controller writes the status meanwhile: retry on conflict.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		old := &v1.Website{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: "default", Name: "converted"}, old); err != nil {
			return fmt.Errorf("reading the v2 Website as v1: %w", err)
		}
		if old.Spec.Image != "nginx" || old.Spec.Replicas != 2 {
			t.Errorf("as v1: spec = %+v, want image nginx and 2 replicas", old.Spec)
		}
		old.Spec.Replicas = 5
		return k8sClient.Update(ctx, old)
	})
	if err != nil {
		t.Fatalf("updating through v1: %v", err)
	}
	now := &v2.Website{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: "default", Name: "converted"}, now); err != nil {
		t.Fatal(err)
	}
	want := v2.WebsiteSpec{Replicas: 5, Container: v2.Container{Image: "nginx", Port: 8080}}
	if now.Spec != want {
		t.Errorf("as v2 after the v1 update: spec = %+v, want %+v", now.Spec, want)
	}
	if len(now.Annotations) != 0 {
		t.Errorf("as v2: annotations %v, want none (the port travels in v1 only)", now.Annotations)
	}
}

// TestCascadingDelete: the controller's Deployment and ConfigMap, owned by
// the Website, go with it (the garbage collector runs in-process).
func TestCascadingDelete(t *testing.T) {
	resetAfter(t)
	ctx := context.Background()
	site := website("default", "cascade", 1)
	if err := k8sClient.Create(ctx, site); err != nil {
		t.Fatal(err)
	}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cascade"}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cascade-page"}}
	for _, obj := range []client.Object{deploy, cm} {
		eventually(t, fmt.Sprintf("the controller's %T", obj), func(ctx context.Context) (bool, error) {
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			return err == nil, nil
		})
		if refs := obj.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != site.UID {
			t.Fatalf("%T owner references = %v, want the Website", obj, refs)
		}
	}
	if err := k8sClient.Delete(ctx, site); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{deploy, cm} {
		eventually(t, fmt.Sprintf("%T deleted with its owner", obj), gone(k8sClient, obj))
	}
}

// TestNamespaceDeletion: a namespace with the operator's objects in it
// finishes deleting.
func TestNamespaceDeletion(t *testing.T) {
	resetAfter(t)
	ctx := context.Background()
	namespace(t, k8sClient, "doomed")
	if err := k8sClient.Create(ctx, website("doomed", "site", 1)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the controller's Deployment", func(ctx context.Context) (bool, error) {
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: "doomed", Name: "site"}, &appsv1.Deployment{})
		return err == nil, nil
	})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}
	if err := k8sClient.Delete(ctx, ns); err != nil {
		t.Fatal(err)
	}
	eventually(t, "namespace doomed deleted", gone(k8sClient, ns))
}

// TestReset: Reset deletes what a test created and writes back what it
// changed, keeping the CRDs and webhooks Start installed.
func TestReset(t *testing.T) {
	ctx := context.Background()
	namespace(t, k8sClient, "scratch")
	if err := k8sClient.Create(ctx, website("scratch", "site", 1)); err != nil {
		t.Fatal(err)
	}
	def := &corev1.Namespace{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Name: "default"}, def); err != nil {
		t.Fatal(err)
	}
	def.Labels["changed-by-test"] = "yes"
	if err := k8sClient.Update(ctx, def); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"}}
	if err := k8sClient.Delete(ctx, svc); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	if err := testEnv.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("Reset took %s", time.Since(start))

	if err := k8sClient.Get(ctx, client.ObjectKey{Name: "scratch"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace scratch after Reset: %v, want NotFound", err)
	}
	sites := &v2.WebsiteList{}
	if err := k8sClient.List(ctx, sites); err != nil || len(sites.Items) != 0 {
		t.Errorf("Websites after Reset: %d, %v; want none", len(sites.Items), err)
	}
	if err := k8sClient.Get(ctx, client.ObjectKey{Name: "default"}, def); err != nil || def.Labels["changed-by-test"] != "" {
		t.Errorf("namespace default after Reset: labels %v, %v; want the test's label gone", def.Labels, err)
	}
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil || svc.Spec.ClusterIP == "" {
		t.Errorf("Service kubernetes after Reset: %v, want it back with its ClusterIP", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Name: "websites.sample.kubeboot.test"}, crd); err != nil {
		t.Errorf("the suite's CRD after Reset: %v", err)
	}
	if err := k8sClient.Create(ctx, website("default", "too-big", 11)); !apierrors.IsInvalid(err) {
		t.Errorf("after Reset the validating webhook must still refuse 11 replicas: err = %v", err)
	}
	// The server works as before: the controller serves a new Website.
	if err := k8sClient.Create(ctx, website("default", "after-reset", 1)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the controller's Deployment after Reset", func(ctx context.Context) (bool, error) {
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: "default", Name: "after-reset"}, &appsv1.Deployment{})
		return err == nil, nil
	})
	if err := testEnv.Reset(ctx); err != nil {
		t.Fatal(err)
	}
}
