package pki

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteKubeconfig writes a kubeconfig (mode 0600) for a client certificate
// user against server (an https URL), trusting caPEM.
func WriteKubeconfig(path, clusterName, server string, caPEM []byte, user *KeyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[clusterName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	userName := user.Cert.Subject.CommonName
	cfg.AuthInfos[userName] = &clientcmdapi.AuthInfo{ClientCertificateData: user.CertPEM, ClientKeyData: user.KeyPEM}
	ctxName := userName + "@" + clusterName
	cfg.Contexts[ctxName] = &clientcmdapi.Context{Cluster: clusterName, AuthInfo: userName}
	cfg.CurrentContext = ctxName
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("encoding kubeconfig: %w", err)
	}
	return WriteFile(path, data, 0o600)
}
