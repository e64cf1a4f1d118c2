package clusterauthentication_test

import (
	"bytes"
	"context"
	"encoding/pem"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/internal/controller/clusterauthentication"
	"github.com/kubeboot/kubeboot/internal/pki"
	"github.com/kubeboot/kubeboot/kubeboottest"
)

// One server for the package. Its own controller wrote the ConfigMap at
// start and looks again only after a minute; the tests share the one
// ConfigMap and run one after the other.
var client kubernetes.Interface

func TestMain(m *testing.M) {
	kubeboottest.Main(kubeboottest.Options{}, func(srv *kubeboottest.Server) int {
		client = kubernetes.NewForConfigOrDie(srv.Config)
		return m.Run()
	})
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newCA returns a new self-signed CA certificate, PEM-encoded.
func newCA(t *testing.T, name string) []byte {
	t.Helper()
	ca, err := pki.EnsureCA(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	return ca.CertPEM
}

func cat(bundles ...[]byte) []byte { return bytes.Join(bundles, nil) }

func getConfigMap(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctxFor(t), clusterauthentication.ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

// setConfigMap replaces the ConfigMap by one holding data (none when nil).
func setConfigMap(t *testing.T, data map[string]string, exists bool) *corev1.ConfigMap {
	t.Helper()
	ctx := ctxFor(t)
	cms := client.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	if err := cms.Delete(ctx, clusterauthentication.ConfigMapName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if !exists {
		return nil
	}
	cm, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: clusterauthentication.ConfigMapName, Namespace: metav1.NamespaceSystem},
		Data:       data,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func TestServerWroteIt(t *testing.T) {
	cm := getConfigMap(t)
	if cm == nil {
		t.Fatal("the server did not create the ConfigMap")
	}
	if block, _ := pem.Decode([]byte(cm.Data[clusterauthentication.ClientCAKey])); block == nil || block.Type != "CERTIFICATE" {
		t.Errorf("client-ca-file = %q, want a PEM certificate", cm.Data[clusterauthentication.ClientCAKey])
	}
}

func TestSync(t *testing.T) {
	ours, other, third := newCA(t, "ours"), newCA(t, "other"), newCA(t, "third")
	tests := []struct {
		name          string
		exists        bool
		initial       map[string]string
		ca            []byte
		want          []byte
		wantUnchanged bool
	}{
		{name: "created when missing", ca: ours, want: ours},
		{name: "no data: key added", exists: true, ca: ours, want: ours},
		{name: "other keys kept", exists: true, initial: map[string]string{"requestheader-allowed-names": `["front"]`}, ca: ours, want: ours},
		{
			name: "another apiserver's CA kept, ours appended", exists: true,
			initial: map[string]string{clusterauthentication.ClientCAKey: string(other)}, ca: ours, want: cat(other, ours),
		},
		{
			name: "ours already there: untouched", exists: true,
			initial: map[string]string{clusterauthentication.ClientCAKey: string(cat(other, ours))}, ca: ours,
			want: cat(other, ours), wantUnchanged: true,
		},
		{
			name: "our bundle of two, one already there", exists: true,
			initial: map[string]string{clusterauthentication.ClientCAKey: string(cat(third, other))}, ca: cat(ours, other),
			want: cat(third, other, ours),
		},
		{
			name: "duplicates in the stored bundle collapse", exists: true,
			initial: map[string]string{clusterauthentication.ClientCAKey: string(cat(other, other))}, ca: ours,
			want: cat(other, ours),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t)
			before := setConfigMap(t, tc.initial, tc.exists)
			c := clusterauthentication.New(client, tc.ca, nil, time.Hour)
			if err := c.Sync(ctx); err != nil {
				t.Fatalf("sync: %v", err)
			}
			cm := getConfigMap(t)
			if cm == nil {
				t.Fatal("no ConfigMap")
			}
			if got := cm.Data[clusterauthentication.ClientCAKey]; got != string(tc.want) {
				t.Errorf("client-ca-file =\n%s\nwant\n%s", got, tc.want)
			}
			for k, v := range tc.initial {
				if k != clusterauthentication.ClientCAKey && cm.Data[k] != v {
					t.Errorf("key %s = %q, want %q kept", k, cm.Data[k], v)
				}
			}
			if tc.wantUnchanged && cm.ResourceVersion != before.ResourceVersion {
				t.Error("ConfigMap rewritten")
			}
			// Idempotent: a second pass writes nothing.
			if err := c.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if again := getConfigMap(t); again.ResourceVersion != cm.ResourceVersion {
				t.Errorf("second pass rewrote the ConfigMap")
			}
		})
	}
}

// Two apiservers with different CAs converge on both, in either order.
func TestTwoAPIServers(t *testing.T) {
	ctx := ctxFor(t)
	a, b := newCA(t, "a"), newCA(t, "b")
	setConfigMap(t, nil, false)
	ca, cb := clusterauthentication.New(client, a, nil, time.Hour), clusterauthentication.New(client, b, nil, time.Hour)
	for range 2 {
		for _, c := range []*clusterauthentication.Controller{ca, cb} {
			if err := c.Sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := getConfigMap(t).Data[clusterauthentication.ClientCAKey]; got != string(cat(a, b)) {
		t.Errorf("client-ca-file =\n%s\nwant a then b", got)
	}
}

// Start writes before returning, then restores our CA within an interval.
func TestStart(t *testing.T) {
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	ours, other := newCA(t, "ours"), newCA(t, "other")
	setConfigMap(t, nil, false)
	if err := clusterauthentication.New(client, ours, nil, 100*time.Millisecond).Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := getConfigMap(t); got == nil || got.Data[clusterauthentication.ClientCAKey] != string(ours) {
		t.Fatalf("after Start: %v", got)
	}
	setConfigMap(t, map[string]string{clusterauthentication.ClientCAKey: string(other)}, true)
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		cm := getConfigMap(t)
		return cm != nil && cm.Data[clusterauthentication.ClientCAKey] == string(cat(other, ours)), nil
	})
	if err != nil {
		t.Fatalf("our CA not merged back: %v", getConfigMap(t).Data)
	}
}

func TestMergeBundles(t *testing.T) {
	a, b := newCA(t, "a"), newCA(t, "b")
	key := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("secret")})
	tests := []struct {
		name      string
		have, add []byte
		want      []byte
	}{
		{name: "empty", want: nil},
		{name: "add to nothing", add: a, want: a},
		{name: "keep what is there", have: a, want: a},
		{name: "append", have: a, add: b, want: cat(a, b)},
		{name: "already there", have: cat(a, b), add: a, want: cat(a, b)},
		{name: "duplicates in add", add: cat(b, b, a), want: cat(b, a)},
		{name: "non-certificate blocks dropped", have: cat(key, a), add: key, want: a},
		{name: "text around blocks ignored", have: cat([]byte("# comment\n"), a, []byte("junk")), add: b, want: cat(a, b)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := clusterauthentication.MergeBundles(tc.have, tc.add); !bytes.Equal(got, tc.want) {
				t.Errorf("MergeBundles =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
