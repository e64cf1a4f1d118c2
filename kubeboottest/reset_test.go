package kubeboottest_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/kubeboottest"
)

// TestReset: what Options.Setup created stays, objects created after the
// checkpoint go, objects changed or deleted come back, and the server
// keeps working: the kubernetes Service's ClusterIP stays allocated, a new
// Service gets an address.
func TestReset(t *testing.T) {
	fixture := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fixture", Namespace: "default"}}
	srv := kubeboottest.Start(t, kubeboottest.Options{Setup: func(ctx context.Context, s *kubeboottest.Server) error {
		_, err := kubernetes.NewForConfigOrDie(s.Config).CoreV1().ConfigMaps("default").Create(ctx, fixture, metav1.CreateOptions{})
		return err
	}})
	client := kubernetes.NewForConfigOrDie(srv.Config)
	ctx := context.Background()

	before, err := client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "scratch"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Data: map[string]string{"k": "v"}}
	if _, err := client.CoreV1().ConfigMaps("scratch").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	created, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	def, err := client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	def.Labels["test"] = "changed"
	if _, err := client.CoreV1().Namespaces().Update(ctx, def, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Services("default").Delete(ctx, "kubernetes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := srv.Reset(ctx); err != nil {
		t.Fatal(err)
	}

	if _, err := client.CoreV1().ConfigMaps("default").Get(ctx, "fixture", metav1.GetOptions{}); err != nil {
		t.Errorf("the fixture Options.Setup created, after Reset: %v", err)
	}
	if _, err := client.CoreV1().Namespaces().Get(ctx, "scratch", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace scratch after Reset: %v, want NotFound", err)
	}
	if list, err := client.CoreV1().ConfigMaps("scratch").List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Errorf("ConfigMaps of scratch after Reset: %d, %v; want none", len(list.Items), err)
	}
	if _, err := client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Service web after Reset: %v, want NotFound", err)
	}
	if def, err := client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil || def.Labels["test"] != "" {
		t.Errorf("namespace default after Reset: labels %v, %v; want the test's label gone", def.Labels, err)
	}
	after, err := client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Service kubernetes after Reset: %v", err)
	}
	if after.UID != before.UID || after.Spec.ClusterIP != before.Spec.ClusterIP {
		t.Errorf("Service kubernetes after Reset: UID %s, ClusterIP %s; want %s, %s as before", after.UID, after.Spec.ClusterIP, before.UID, before.Spec.ClusterIP)
	}
	// The web Service's address is free again, and the kubernetes
	// Service's is still taken.
	svc.Spec.ClusterIP = created.Spec.ClusterIP
	if _, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Errorf("creating a Service on the address of one Reset deleted: %v", err)
	}
	svc.Name, svc.Spec.ClusterIP = "squatter", before.Spec.ClusterIP
	if _, err := client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("creating a Service on the kubernetes Service's address after Reset: %v, want Invalid (already allocated)", err)
	}
}
