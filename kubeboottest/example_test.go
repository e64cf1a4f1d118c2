package kubeboottest_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/kubeboottest"
)

// A controller's test starts a real API server and talks to it with
// client-go.
func TestExample(t *testing.T) {
	srv := kubeboottest.Start(t, kubeboottest.Options{})
	client := kubernetes.NewForConfigOrDie(srv.Config)

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if _, err := client.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().ConfigMaps("default").Get(context.Background(), "settings", metav1.GetOptions{})
	if err != nil || got.Data["k"] != "v" {
		t.Fatalf("got %v, %v", got, err)
	}
}
