package kubeletclient

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeboot/kubeboot/internal/platform/nodejoin"
)

// request is a kubelet client certificate request for cn, sent as user,
// with usages.
func request(t *testing.T, user, cn string, usages ...certificatesv1.KeyUsage) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	if usages == nil {
		usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	}
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     usages,
			Username:   user,
		},
	}
}

// TestVerdict: a request made with a token nodejoin issued is approved
// for the token's node and denied for any other; requests made otherwise
// are left to kube-controller-manager.
func TestVerdict(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-abcdef", Namespace: metav1.NamespaceSystem,
			Annotations: map[string]string{nodejoin.NodeAnnotation: "n1"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-kubead", Namespace: metav1.NamespaceSystem}},
	} {
		if err := indexer.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	a := approver{tokens: corelisters.NewSecretLister(indexer).Secrets(metav1.NamespaceSystem)}
	for _, tc := range []struct {
		name string
		csr  *certificatesv1.CertificateSigningRequest
		want certificatesv1.RequestConditionType
	}{
		{"the token's node", request(t, "system:bootstrap:abcdef", "system:node:n1"), certificatesv1.CertificateApproved},
		{"another node", request(t, "system:bootstrap:abcdef", "system:node:n2"), certificatesv1.CertificateDenied},
		{"not a node", request(t, "system:bootstrap:abcdef", "admin"), certificatesv1.CertificateDenied},
		{"serving usages", request(t, "system:bootstrap:abcdef", "system:node:n1",
			certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth), certificatesv1.CertificateDenied},
		{"a kubeadm token", request(t, "system:bootstrap:kubead", "system:node:n1"), ""},
		{"an unknown token", request(t, "system:bootstrap:zzzzzz", "system:node:n1"), ""},
		{"a node's renewal", request(t, "system:node:n1", "system:node:n1"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := a.verdict(tc.csr); got.Type != tc.want {
				t.Errorf("verdict %q (%s), want %q", got.Type, got.Message, tc.want)
			}
		})
	}
}
