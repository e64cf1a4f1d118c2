package hostnode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	bootstraptokenv1 "k8s.io/kubernetes/cmd/kubeadm/app/apis/bootstraptoken/v1"
	tokenphase "k8s.io/kubernetes/cmd/kubeadm/app/phases/bootstraptoken/node"
	kubeconfigutil "k8s.io/kubernetes/cmd/kubeadm/app/util/kubeconfig"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// bootstrapUser names the user of the bootstrap kubeconfig.
const bootstrapUser = "kubelet-bootstrap"

// setUpTLSBootstrap does what `kubeadm init` does for a node to join: a
// bootstrap token in kube-system, valid kubeadm's 24 h from now, and the
// RBAC of allowTLSBootstrap. It writes the kubeconfig with the token to
// path, for the kubelet's --bootstrap-kubeconfig. A token already in path
// is kept (and its expiry moved on), so each start does not leave another.
// Once the kubelet holds a client certificate (in certDir) that has not
// expired, it needs no token: the token is left to expire, and
// kube-controller-manager's token cleaner deletes it, as kubeadm's join
// token.
func setUpTLSBootstrap(client kubernetes.Interface, serverURL string, caPEM []byte, path, certDir string) error {
	if err := allowTLSBootstrap(client); err != nil {
		return err
	}
	if joined(certDir, time.Now()) {
		return nil
	}
	token, err := tokenIn(path)
	if err != nil {
		return err
	}
	if token == "" {
		if token, err = bootstraputil.GenerateBootstrapToken(); err != nil {
			return err
		}
	}
	ts, err := bootstraptokenv1.NewBootstrapTokenString(token)
	if err != nil {
		return err
	}
	bt := bootstraptokenv1.BootstrapToken{Token: ts, Description: "The kubelet of kubeboot server --node bootstraps its client certificate with it."}
	bootstraptokenv1.SetDefaults_BootstrapToken(&bt)
	if err := tokenphase.UpdateOrCreateTokens(client, false, []bootstraptokenv1.BootstrapToken{bt}); err != nil {
		return fmt.Errorf("bootstrap token: %w", err)
	}
	return kubeconfigutil.WriteToDisk(path, kubeconfigutil.CreateWithToken(serverURL, controlplane.ClusterName, bootstrapUser, caPEM, token))
}

// allowTLSBootstrap is kubeadm's RBAC for the TLS bootstrap: a bootstrap
// token may ask for a node client certificate, which the controller
// manager approves, as it approves the renewals of node certificates; the
// server's kubelet client certificate may use the kubelet's API.
func allowTLSBootstrap(client kubernetes.Interface) error {
	for _, rbac := range []func(kubernetes.Interface) error{
		tokenphase.AllowBootstrapTokensToPostCSRs,
		tokenphase.AllowBootstrapTokensToGetNodes,
		tokenphase.AutoApproveNodeBootstrapTokens,
		tokenphase.AutoApproveNodeCertificateRotation,
		tokenphase.AllowAPIServerToAccessKubeletAPI,
	} {
		if err := rbac(client); err != nil {
			return fmt.Errorf("RBAC for the TLS bootstrap: %w", err)
		}
	}
	return nil
}

// kubeletClientCertName is the kubelet's current client certificate and
// key, in its --cert-dir.
const kubeletClientCertName = "kubelet-client-current.pem"

// joined reports whether the kubelet holds a client certificate in
// certDir that is valid at now.
func joined(certDir string, now time.Time) bool {
	path := filepath.Join(certDir, kubeletClientCertName)
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	certs, err := pki.ParseCertificates(path, data)
	return err == nil && now.Before(certs[0].NotAfter)
}

// tokenIn returns the bootstrap token of the kubeconfig at path, or ""
// if there is none or it is not a bootstrap token.
func tokenIn(path string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("bootstrap kubeconfig: %w", err)
	}
	if info := cfg.AuthInfos[bootstrapUser]; info != nil && bootstraputil.IsValidBootstrapToken(info.Token) {
		return info.Token, nil
	}
	return "", nil
}
