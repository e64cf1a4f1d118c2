package gateway

import (
	"context"
	"crypto/tls"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/internal/components/gateway/dataplane"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// defaultCertificateName is the Secret, in kube-system, of the certificate
// the Ingresses' TLS port presents to a client whose host no Ingress has
// a certificate for: self-signed, made once for the cluster.
const defaultCertificateName = "kubeboot-ingress-default-certificate"

// ensureDefaultCertificate returns the Ingresses' default certificate,
// making it if the cluster has none.
func ensureDefaultCertificate(ctx context.Context, kube kubernetes.Interface) (*dataplane.Certificate, error) {
	secrets := kube.CoreV1().Secrets(metav1.NamespaceSystem)
	s, err := secrets.Get(ctx, defaultCertificateName, metav1.GetOptions{})
	found := err == nil
	if found {
		cert := &dataplane.Certificate{Cert: s.Data[corev1.TLSCertKey], Key: s.Data[corev1.TLSPrivateKeyKey]}
		if _, err := tls.X509KeyPair(cert.Cert, cert.Key); err == nil {
			return cert, nil
		}
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	kp, err := pki.NewSelfSigned(pki.ServingSpec{CommonName: "kubeboot ingress default certificate"})
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: defaultCertificateName},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: kp.CertPEM, corev1.TLSPrivateKeyKey: kp.KeyPEM}}
	if found {
		// Not a certificate and key: made anew.
		_, err = secrets.Update(ctx, secret, metav1.UpdateOptions{})
	} else {
		_, err = secrets.Create(ctx, secret, metav1.CreateOptions{})
	}
	if apierrors.IsAlreadyExists(err) {
		// Another server made it first: take its.
		return ensureDefaultCertificate(ctx, kube)
	}
	if err != nil {
		return nil, err
	}
	return &dataplane.Certificate{Cert: kp.CertPEM, Key: kp.KeyPEM}, nil
}
