package hostnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	kubeconfigutil "k8s.io/kubernetes/cmd/kubeadm/app/util/kubeconfig"
	"sigs.k8s.io/yaml"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/platform/nodejoin"
	"github.com/kubeboot/kubeboot/internal/platform/nodesettings"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// bootstrapUser names the user of the bootstrap kubeconfig.
const bootstrapUser = "kubelet-bootstrap"

// kubeletClientCertName is the kubelet's current client certificate and
// key, in its --cert-dir.
const kubeletClientCertName = "kubelet-client-current.pem"

// passwordFileName holds the node's password (nodejoin), in the node's
// directory: what proves, at its next join, that this host is the node.
const passwordFileName = "password"

// Joined reports whether the node in dir has joined and needs nothing
// from a server to start: its kubelet holds a client certificate valid at
// now, and kube-proxy and the node's agent have their kubeconfigs.
func Joined(dir string, now time.Time) bool {
	for _, name := range []string{proxyKubeconfigName, agentKubeconfigName} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return false
		}
	}
	path := filepath.Join(dir, kubeletCertDirName, kubeletClientCertName)
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	certs, err := pki.ParseCertificates(path, data)
	return err == nil && now.Before(certs[0].NotAfter)
}

// JoinedCluster is the cluster as the node in dir, which has joined
// (Joined), keeps it: the CA its kubelet was given and the cluster's
// settings (cluster.json).
func JoinedCluster(dir string) (Cluster, error) {
	ca, err := os.ReadFile(filepath.Join(dir, clientCAName))
	if err != nil {
		return Cluster{}, err
	}
	settings, err := readClusterSettings(dir)
	if err != nil {
		return Cluster{}, err
	}
	return Cluster{CA: ca, Settings: settings}, nil
}

// ProxyKubeconfig is kube-proxy's kubeconfig in the node's dir.
func ProxyKubeconfig(dir string) string { return filepath.Join(dir, proxyKubeconfigName) }

// AgentKubeconfig is the node agent's kubeconfig in the node's dir
// (nodejoin.AgentUser).
func AgentKubeconfig(dir string) string { return filepath.Join(dir, agentKubeconfigName) }

// Password returns the node password kept in dir, or a new one if there
// is none yet, which StorePassword keeps once the join succeeded.
func Password(dir string) (password string, stored bool, _ error) {
	data, err := os.ReadFile(filepath.Join(dir, passwordFileName))
	if errors.Is(err, fs.ErrNotExist) {
		password, err := nodejoin.NewPassword()
		return password, false, err
	}
	if err != nil {
		return "", false, fmt.Errorf("the node password: %w", err)
	}
	return strings.TrimSpace(string(data)), true, nil
}

// StorePassword keeps password in dir.
func StorePassword(dir, password string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return pki.WriteFile(filepath.Join(dir, passwordFileName), []byte(password+"\n"), 0o600)
}

// writeBootstrapKubeconfig writes the kubelet's --bootstrap-kubeconfig:
// the server at url, verified against caPEM, and the bootstrap token.
func writeBootstrapKubeconfig(path, url string, caPEM []byte, token string) error {
	return kubeconfigutil.WriteToDisk(path, kubeconfigutil.CreateWithToken(url, controlplane.ClusterName, bootstrapUser, caPEM, token))
}

// writeClusterSettings keeps the cluster's settings in dir, for the
// node's next start without a server.
func writeClusterSettings(dir string, s nodesettings.Settings) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, clusterSettingsName), data, 0o600)
}

// readClusterSettings reads the settings writeClusterSettings kept. A
// cluster.json written before it held the cluster DNS (its domain empty)
// leaves it to the kubelet's configuration, which has it.
func readClusterSettings(dir string) (nodesettings.Settings, error) {
	var s nodesettings.Settings
	path := filepath.Join(dir, clusterSettingsName)
	data, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	if s.ClusterDomain != "" {
		return s, nil
	}
	data, err = os.ReadFile(filepath.Join(dir, kubeletConfigName))
	if err != nil {
		return s, err
	}
	var cfg kubeletconfigv1beta1.KubeletConfiguration
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return s, fmt.Errorf("%s: %w", kubeletConfigName, err)
	}
	s.ClusterDomain = cfg.ClusterDomain
	for _, dns := range cfg.ClusterDNS {
		a, err := netip.ParseAddr(dns)
		if err != nil {
			return s, fmt.Errorf("%s: clusterDNS: %w", kubeletConfigName, err)
		}
		s.ClusterDNS = append(s.ClusterDNS, a)
	}
	return s, nil
}
