package controlplane

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubeadmconstants "k8s.io/kubernetes/cmd/kubeadm/app/constants"

	"github.com/kubeboot/kubeboot/internal/platform/carotation"
	"github.com/kubeboot/kubeboot/internal/platform/clusterjoin"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// ClusterName names the cluster in the kubeconfigs the server writes.
const ClusterName = "kubeboot"

const (
	pkiDirName = "pki"
	// servingPairName names the generated serving certificate's files in
	// pki (apiserver.crt, apiserver.key), as kubeadm's.
	servingPairName     = "apiserver"
	adminKubeconfigName = "admin.kubeconfig"
	// superAdminKubeconfigName is kubeadm's super-admin.conf: system:masters,
	// which no RBAC binding can take away; for break-glass use.
	superAdminKubeconfigName = "super-admin.kubeconfig"
	// adminUser and superAdminUser are kubeadm's names for them.
	adminUser      = "kubernetes-admin"
	superAdminUser = "kubernetes-super-admin"
	// frontProxyCAName names the front proxy CA's files in pki.
	frontProxyCAName = "front-proxy-ca"
	// signerDirName is where pki keeps the cluster CA's certificate alone
	// (Settings.CASignerFile).
	signerDirName = "signer"
)

type certificates struct {
	ca *pki.KeyPair
	// frontProxyCA signs the aggregator's client certificate for
	// extension apiservers (frontProxyCert/Key, files).
	frontProxyCA                  *pki.KeyPair
	frontProxyCert, frontProxyKey string
	// kubeletClientCert and kubeletClientKey are the files of the client
	// certificate the server presents to kubelets.
	kubeletClientCert, kubeletClientKey string
	loopback                            *pki.KeyPair
	clientCAFiles                       []string
	serverURL                           string
	adminConfig                         *rest.Config
}

// ensureCertificates creates or reuses the CA, serving and admin
// certificates in <data-dir>/pki, writes admin.kubeconfig for port, and
// issues an in-memory certificate for the server's loopback clients.
func ensureCertificates(cfg *completedConfig, port int) (*certificates, error) {
	dir := PKIDirIn(cfg.DataDir)
	ca, err := pki.EnsureCA(dir, "kubeboot-ca")
	if err != nil {
		return nil, fmt.Errorf("cluster CA in %s: %w", dir, err)
	}
	if err := pki.WriteCertificate(filepath.Join(dir, signerDirName, pki.CAName+".crt"), ca.Cert); err != nil {
		return nil, fmt.Errorf("cluster CA in %s: %w", dir, err)
	}
	if cfg.servingCert {
		if _, err := pki.EnsureServing(dir, servingPairName, ca, servingSpec(cfg)); err != nil {
			return nil, fmt.Errorf("serving certificate in %s: %w", dir, err)
		}
	}
	// As kubeadm since 1.29: the admin is cluster-admin through a binding
	// of its group (bootstrapobjects), which can be revoked; the super
	// admin is system:masters.
	admin, err := pki.EnsureClient(dir, "admin", ca, adminUser, []string{kubeadmconstants.ClusterAdminsGroupAndClusterRoleBinding})
	if err != nil {
		return nil, fmt.Errorf("admin certificate in %s: %w", dir, err)
	}
	superAdmin, err := pki.EnsureClient(dir, "super-admin", ca, superAdminUser, []string{kubeadmconstants.SystemPrivilegedGroup})
	if err != nil {
		return nil, fmt.Errorf("super-admin certificate in %s: %w", dir, err)
	}
	frontProxyCA, err := pki.EnsureNamedCA(dir, frontProxyCAName, "kubeboot-front-proxy-ca")
	if err != nil {
		return nil, fmt.Errorf("front proxy CA in %s: %w", dir, err)
	}
	if _, err := pki.EnsureClient(dir, "front-proxy-client", frontProxyCA, "front-proxy-client", nil); err != nil {
		return nil, fmt.Errorf("front proxy client certificate in %s: %w", dir, err)
	}
	// kubeadm's apiserver-kubelet-client, under kubeadm's user name, which
	// a node's RBAC (hostnode) binds to system:kubelet-api-admin.
	if _, err := pki.EnsureClient(dir, "apiserver-kubelet-client", ca, kubeadmconstants.APIServerKubeletClientCertCommonName, nil); err != nil {
		return nil, fmt.Errorf("kubelet client certificate in %s: %w", dir, err)
	}
	loopback, err := pki.NewServing(ca, pki.ServingSpec{CommonName: "apiserver-loopback-client", DNSNames: []string{"apiserver-loopback-client"}})
	if err != nil {
		return nil, fmt.Errorf("loopback certificate: %w", err)
	}
	if _, err := pki.EnsureSigningKey(dir, pki.ServiceAccountKeyName); err != nil {
		return nil, fmt.Errorf("service account signing key in %s: %w", dir, err)
	}
	// The token: what other servers and agents join with.
	if _, err := clusterjoin.EnsureToken(TokenFileIn(cfg.DataDir), ca.CertPEM); err != nil {
		return nil, fmt.Errorf("the join token: %w", err)
	}
	// --agent-token, given as a password alone, is completed with the CA's
	// hash; the server writes it to the cluster's record of its tokens,
	// and from there to every server's agent-token (syncJoinTokens).
	if t := cfg.agentToken; t != nil {
		switch hash := clusterjoin.CAHash(ca.CertPEM); {
		case t.CAHash == "":
			t.CAHash = hash
		case t.CAHash != hash:
			return nil, fmt.Errorf("--agent-token: its CA hash %s is not this cluster's %s", t.CAHash, hash)
		}
	}
	if cfg.cluster != nil {
		if err := ensureClusterCertificates(cfg, ca); err != nil {
			return nil, err
		}
	}
	clientCAFiles := []string{filepath.Join(dir, pki.CAName+".crt")}
	if f := cfg.clientCAFile(); f != "" {
		clientCAFiles = append(clientCAFiles, f)
	}

	host := "127.0.0.1"
	if bind := cfg.SecureServing.BindAddress; !bind.IsUnspecified() {
		host = bind.String()
	}
	serverURL := "https://" + net.JoinHostPort(host, strconv.Itoa(port))
	for name, kp := range map[string]*pki.KeyPair{adminKubeconfigName: admin, superAdminKubeconfigName: superAdmin} {
		if err := pki.WriteKubeconfig(filepath.Join(cfg.DataDir, name), ClusterName, serverURL, ca.CertPEM, kp); err != nil {
			return nil, fmt.Errorf("writing %s: %w", name, err)
		}
	}
	// Every file in pki 0600, including those an earlier version wrote
	// 0644 (CIS 1.1.20).
	if err := pki.TightenModes(dir); err != nil {
		return nil, fmt.Errorf("pki files in %s: %w", dir, err)
	}
	for _, k := range cfg.componentKubeconfigs {
		kp, err := pki.EnsureClient(dir, k.name, ca, k.user, nil)
		if err != nil {
			return nil, fmt.Errorf("%s certificate in %s: %w", k.name, dir, err)
		}
		if err := pki.WriteKubeconfig(k.path(cfg.DataDir), ClusterName, serverURL, ca.CertPEM, kp); err != nil {
			return nil, fmt.Errorf("writing %s: %w", k.path(cfg.DataDir), err)
		}
	}
	return &certificates{
		ca:             ca,
		frontProxyCA:   frontProxyCA,
		frontProxyCert: filepath.Join(dir, "front-proxy-client.crt"),
		frontProxyKey:  filepath.Join(dir, "front-proxy-client.key"),

		kubeletClientCert: filepath.Join(dir, "apiserver-kubelet-client.crt"),
		kubeletClientKey:  filepath.Join(dir, "apiserver-kubelet-client.key"),
		loopback:          loopback,
		clientCAFiles:     clientCAFiles,

		serverURL: serverURL,
		adminConfig: &rest.Config{
			Host: serverURL,
			TLSClientConfig: rest.TLSClientConfig{
				CAData:   ca.CertPEM,
				CertData: superAdmin.CertPEM,
				KeyData:  superAdmin.KeyPEM,
			},
		},
	}, nil
}

// servingSpec lists the serving certificate's names, as kube-apiserver's
// self-signed certificate: the advertise and bind addresses, localhost,
// the kubernetes Service IPs and DNS names.
func servingSpec(cfg *completedConfig) pki.ServingSpec {
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback, cfg.GenericServerRun.AdvertiseAddress}
	if bind := cfg.SecureServing.BindAddress; !bind.IsUnspecified() {
		ips = append(ips, bind)
	}
	for _, p := range cfg.apiserver.Services.CIDRs.All() {
		ips = append(ips, addrIP(p.Addr().Next()))
	}
	names := []string{
		"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc." + cfg.Nodes.ClusterDomain,
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		names = append(names, h)
	}
	return pki.ServingSpec{CommonName: "kube-apiserver", DNSNames: names, IPs: ips}
}

func addrIP(a netip.Addr) net.IP { return net.IP(a.AsSlice()) }

// prepareDataDir creates the data directory if needed and makes it 0700
// at every start (CIS 1.1.11), whatever mode it had.
func prepareDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--data-dir %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("--data-dir %s: %w", dir, err)
	}
	return nil
}

// syncCARotation stages the cluster's last CA rotation (kubeboot
// certificate rotate-ca on any server) in the data dir's pki, for the
// server's next start, from the time the server is ready.
func (s *Server) syncCARotation(ctx context.Context) {
	s.onceReady(ctx, "Following the cluster's CA rotations", func(client kubernetes.Interface) {
		carotation.Sync(ctx, client, PKIDirIn(s.cfg.DataDir))
	})
}

// flagFile is a file given by flag.
type flagFile struct{ flag, path string }

// userCertificates are the certificate files given by flag, which the
// server uses and never renews.
func (cc *completedConfig) userCertificates() []flagFile {
	var out []flagFile
	add := func(flag, path string) {
		if path != "" {
			out = append(out, flagFile{flag, path})
		}
	}
	if !cc.servingCert {
		add("--tls-cert-file", cc.SecureServing.ServerCert.CertKey.CertFile)
	}
	add("--client-ca-file", cc.clientCAFile())
	if f := cc.KubeletCertificateAuthority; f != filepath.Join(PKIDirIn(cc.DataDir), pki.CAName+".crt") {
		add("--kubelet-certificate-authority", f)
	}
	add("--etcd-certfile", cc.Etcd.StorageConfig.Transport.CertFile)
	add("--etcd-cafile", cc.Etcd.StorageConfig.Transport.TrustedCAFile)
	return out
}
