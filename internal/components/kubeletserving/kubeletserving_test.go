package kubeletserving

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// request is a certificate signing request as a kubelet makes it, for
// cn in org, naming dns and ips, with usages, sent as user in groups.
func request(t *testing.T, user string, groups []string, cn string, org []string, dns []string, ips []net.IP, usages ...certificatesv1.KeyUsage) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: cn, Organization: org}, DNSNames: dns, IPAddresses: ips}, key)
	if err != nil {
		t.Fatal(err)
	}
	if usages == nil {
		usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	}
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeletServingSignerName,
			Usages:     usages,
			Username:   user,
			Groups:     groups,
		},
	}
}

// TestVerdict: a node's serving certificate is approved for its own names
// and addresses only, denied for anything else or anyone else, and left
// pending until its Node exists.
func TestVerdict(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := indexer.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeHostName, Address: "n1"}, {Type: corev1.NodeInternalIP, Address: "198.51.100.1"}}}}); err != nil {
		t.Fatal(err)
	}
	a := approver{nodes: corelisters.NewNodeLister(indexer)}
	nodes := []string{"system:nodes", "system:authenticated"}
	org := []string{"system:nodes"}
	own := []net.IP{net.ParseIP("198.51.100.1")}
	for _, tc := range []struct {
		name string
		csr  *certificatesv1.CertificateSigningRequest
		want certificatesv1.RequestConditionType
	}{
		{"own name and address", request(t, "system:node:n1", nodes, "system:node:n1", org, []string{"n1"}, own), certificatesv1.CertificateApproved},
		{"own address only", request(t, "system:node:n1", nodes, "system:node:n1", org, nil, own), certificatesv1.CertificateApproved},
		{"another node's address", request(t, "system:node:n1", nodes, "system:node:n1", org, []string{"n1"}, []net.IP{net.ParseIP("198.51.100.2")}), certificatesv1.CertificateDenied},
		{"a name the node has not", request(t, "system:node:n1", nodes, "system:node:n1", org, []string{"kubernetes.default.svc"}, own), certificatesv1.CertificateDenied},
		{"another node's identity", request(t, "system:node:n1", nodes, "system:node:n2", org, []string{"n1"}, own), certificatesv1.CertificateDenied},
		{"not a node's credentials", request(t, "alice", []string{"system:authenticated"}, "system:node:n1", org, []string{"n1"}, own), certificatesv1.CertificateDenied},
		{"client usages", request(t, "system:node:n1", nodes, "system:node:n1", org, []string{"n1"}, own,
			certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth), certificatesv1.CertificateDenied},
		{"a node not registered yet", request(t, "system:node:n3", nodes, "system:node:n3", org, []string{"n3"}, nil), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := a.verdict(tc.csr)
			if got.Type != tc.want {
				t.Errorf("verdict %q (%s), want %q", got.Type, got.Message, tc.want)
			}
		})
	}
}
