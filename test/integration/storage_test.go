package integration

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeboot/kubeboot/internal/platform/etcd"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
)

// storedEndpoints reads the kubernetes Endpoints straight from etcd, as
// kube-apiserver stores them, for when no apiserver is left to ask.
func storedEndpoints(t testing.TB, e *etcd.Server) *corev1.Endpoints {
	t.Helper()
	resp, err := e.Client().Get(context.Background(), "/registry/services/endpoints/default/kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 {
		t.Fatalf("no stored kubernetes endpoints")
	}
	obj, _, err := legacyscheme.Codecs.UniversalDeserializer().Decode(resp.Kvs[0].Value, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ep, ok := obj.(*corev1.Endpoints)
	if !ok {
		t.Fatalf("stored object is a %T", obj)
	}
	return ep
}
