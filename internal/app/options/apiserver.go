// Package options registers the flags of kubeboot's servers: each writes
// into the setting's one home, a controlplane.Config option group
// (kube-apiserver's own where it has one) or a component's options.
package options

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/kubeboot/kubeboot/controlplane"
)

// APIServer holds the flags of `kubeboot apiserver`, named and defaulted
// as kube-apiserver's. The flags write into ControlPlane itself, so each
// setting lives in one place and the defaults the help shows are
// controlplane.NewConfig's.
type APIServer struct {
	ControlPlane controlplane.Config

	// flags is the command's flag set, to tell a flag set empty from one
	// left unset.
	flags *pflag.FlagSet
}

// NewAPIServer returns the flag defaults.
func NewAPIServer() *APIServer {
	return &APIServer{ControlPlane: controlplane.NewConfig()}
}

// The flags of kube-apiserver's option groups that kubeboot serves, out of
// those each group's AddFlags registers, with kubeboot's help where its
// meaning differs. The rest are not registered: an unknown flag is
// refused, where an accepted one would be silently ignored.
var (
	servingFlags = []groupFlag{
		{"bind-address", ""},
		{"secure-port", "The port on which to serve HTTPS with authentication and authorization. 0 picks a free port."},
		{"cert-dir", "The directory where the generated serving certificate (apiserver.crt, apiserver.key) is written when --tls-cert-file and --tls-private-key-file are not set. Default: pki in --data-dir."},
		{"tls-cert-file", ""}, {"tls-private-key-file", ""}, {"tls-sni-cert-key", ""},
		{"tls-min-version", ""}, {"tls-cipher-suites", ""}, {"tls-curve-preferences", ""},
		{"http2-max-streams-per-connection", ""}, {"disable-http2-serving", ""},
	}
	etcdFlags = []groupFlag{
		{"etcd-servers", "List of etcd servers to connect with (scheme://ip:port), comma separated. If empty, etcd runs embedded in --data-dir."},
		{"etcd-cafile", ""}, {"etcd-certfile", ""}, {"etcd-keyfile", ""}, {"etcd-prefix", ""},
		{"etcd-compaction-interval", ""}, {"watch-cache", ""},
		{"encryption-provider-config", ""}, {"encryption-provider-config-automatic-reload", ""},
	}
)

// groupFlag is a flag of an upstream option group, with kubeboot's help
// text if not empty.
type groupFlag struct{ name, usage string }

// addGroupFlags adds to fs the flags named of those addFlags registers.
func addGroupFlags(fs *pflag.FlagSet, addFlags func(*pflag.FlagSet), flags []groupFlag) {
	group := pflag.NewFlagSet("group", pflag.ContinueOnError)
	addFlags(group)
	addFlagsOf(fs, group, flags, "")
}

// addFlagsOf adds to fs copies of the flags named of from's, their help
// prefixed with prefix, or replaced by the groupFlag's.
func addFlagsOf(fs, from *pflag.FlagSet, flags []groupFlag, prefix string) {
	for _, f := range flags {
		flag := *from.Lookup(f.name)
		flag.Usage = prefix + flag.Usage
		if f.usage != "" {
			flag.Usage = f.usage
		}
		fs.AddFlag(&flag)
	}
}

// AddFlags registers the flags on fs.
func (o *APIServer) AddFlags(fs *pflag.FlagSet) {
	o.flags = fs
	c := &o.ControlPlane
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "Directory for the embedded etcd data, the generated certificates and admin.kubeconfig.")
	addGroupFlags(fs, c.SecureServing.AddFlags, servingFlags)
	// kube-apiserver's: --advertise-address, --shutdown-delay-duration,
	// --shutdown-watch-termination-grace-period, --max-requests-inflight,
	// --request-timeout, ...
	c.GenericServerRun.AddUniversalFlags(fs)
	addGroupFlags(fs, c.Etcd.AddFlags, etcdFlags)
	fs.BoolVar(&c.AllowPrivileged, "allow-privileged", c.AllowPrivileged, "If true, allow privileged containers. Default true, as kubeadm and k3s set it (kube-apiserver's default is false).")
	fs.BoolVar(&c.ClusterInit, "cluster-init", c.ClusterInit, "Start a cluster that other servers can join (k3s's flag): the embedded etcd takes peers on --advertise-address port 2380 (TLS from its own CA in pki/etcd), and the join token is written to token in --data-dir.")
	fs.StringVar(&c.JoinServer, "server", c.JoinServer, "On the first start, join the cluster of the server at this URL (https://<address>:6443) with --token: fetch its CAs and keys, join its etcd as a learner, serve once promoted. A restart needs neither flag.")
	fs.StringVar(&c.Token, "token", c.Token, "The cluster's join token, K10<CA hash>::server:<password>, from token in the first server's --data-dir. Default: $"+tokenEnv+".")
	fs.StringVar(&c.TokenFile, "token-file", c.TokenFile, "A file holding the join token (--token).")
	fs.StringVar(&c.AgentToken, "agent-token", c.AgentToken, "A token that joins agents but not servers (k3s's flag): a password of at least 16 characters, or K10<CA hash>::node:<password>. It becomes the cluster's agent token, written to agent-token in every server's --data-dir. Default: $"+agentTokenEnv+"; none, and agents join with the server token or a bootstrap token (kubeboot token create).")
	fs.StringVar(&c.AgentTokenFile, "agent-token-file", c.AgentTokenFile, "A file holding the agent token (--agent-token).")
	fs.BoolVar(&c.ClusterReset, "cluster-reset", c.ClusterReset, "Instead of serving, make the embedded etcd member a new cluster of one with its data (a survivor of a lost quorum), or with --cluster-reset-restore-path's snapshot; then start again without the flag (k3s's flag).")
	fs.StringVar(&c.ClusterResetRestorePath, "cluster-reset-restore-path", c.ClusterResetRestorePath, "With --cluster-reset: the snapshot to restore (kubeboot etcd-snapshot save, or a scheduled one). The etcd data it replaces is kept aside.")
	fs.StringVar(&c.EtcdSnapshotDir, "etcd-snapshot-dir", c.EtcdSnapshotDir, "Where snapshots of the embedded etcd are saved. Default: snapshots in --data-dir.")
	fs.StringVar(&c.EtcdSnapshotScheduleCron, "etcd-snapshot-schedule-cron", c.EtcdSnapshotScheduleCron, "When to snapshot the embedded etcd, in cron's five fields.")
	fs.IntVar(&c.EtcdSnapshotRetention, "etcd-snapshot-retention", c.EtcdSnapshotRetention, "How many scheduled snapshots to keep.")
	fs.BoolVar(&c.EtcdDisableSnapshots, "etcd-disable-snapshots", c.EtcdDisableSnapshots, "Take no scheduled snapshots.")
	fs.DurationVar(&c.EtcdSnapshotReconcileInterval, "etcd-snapshot-reconcile-interval", c.EtcdSnapshotReconcileInterval, "How often the snapshots' ETCDSnapshotFile objects are reconciled with the snapshot directory and the bucket, besides after each scheduled snapshot.")
	fs.BoolVar(&c.EtcdSnapshotCompress, "etcd-snapshot-compress", c.EtcdSnapshotCompress, "Keep (and upload) scheduled snapshots as zip archives, <name>.zip.")
	c.EtcdS3.AddFlags(fs)
	fs.Int64Var(&c.EtcdQuotaBackendBytes, "etcd-quota-backend-bytes", c.EtcdQuotaBackendBytes, "The embedded etcd's database size limit (etcd's --quota-backend-bytes); past it etcd raises its NOSPACE alarm and refuses writes until objects are deleted and compacted. 0: etcd's default, 2 GiB.")
	fs.BoolVar(&c.SecretsEncryption, "secrets-encryption", c.SecretsEncryption, "Encrypt Secrets at rest with a key generated on first start, kept in --data-dir (encryption/config.yaml), shared by the cluster's servers and changed on all of them by `kubeboot secrets-encrypt` (k3s's flag). Excludes --encryption-provider-config.")
	fs.StringVar(&c.SecretsEncryptionProvider, "secrets-encryption-provider", c.SecretsEncryptionProvider, "With --secrets-encryption: the type of the keys it generates, aescbc or secretbox (k3s's flag). Changing it takes effect at the next secrets-encrypt rotate-keys or prepare.")

	fs.StringVar(&c.ServiceClusterIPRange, "service-cluster-ip-range", c.ServiceClusterIPRange, "A CIDR notation IP range from which to assign service cluster IPs, or two of different families separated by a comma for dual-stack (kubeadm's default; kube-apiserver's deprecated one is 10.0.0.0/24). --service-cidr is k3s's name for it.")
	// k3s's name for the flag, one setting under both names.
	fs.StringVar(&c.ServiceClusterIPRange, "service-cidr", c.ServiceClusterIPRange, "--service-cluster-ip-range (k3s's name).")
	fs.StringVar(&c.ServiceNodePortRange, "service-node-port-range", c.ServiceNodePortRange, "A port range to reserve for services with NodePort visibility. Example: '30000-32767'. Inclusive at both ends of the range.")

	fs.IntVar(&c.KubernetesServiceNodePort, "kubernetes-service-node-port", c.KubernetesServiceNodePort, "If non-zero, the Kubernetes master service (which apiserver creates/maintains) will be of type NodePort, using this as the value of the port. If zero, the Kubernetes master service will be of type ClusterIP.")
	fs.StringVar(&c.EndpointReconcilerType, "endpoint-reconciler-type", c.EndpointReconcilerType, "Use an endpoint reconciler (master-count, lease, none).")
	fs.IntVar(&c.APIServerCount, "apiserver-count", c.APIServerCount, "The number of apiservers running in the cluster, must be a positive number. (In use when --endpoint-reconciler-type=master-count is enabled.)")
	fs.DurationVar(&c.EndpointLeaseTTL, "endpoint-lease-ttl", c.EndpointLeaseTTL, "How long the endpoint lease of an apiserver that stopped renewing it lives: a crashed apiserver leaves the kubernetes endpoints within about this time. (lease reconciler)")
	fs.DurationVar(&c.EndpointReconcileInterval, "endpoint-reconciler-interval", c.EndpointReconcileInterval, "How often the kubernetes Service and its endpoints are reconciled.")

	fs.DurationVar(&c.RepairInterval, "service-ip-repair-interval", c.RepairInterval, "How often the Service ClusterIP and NodePort repair loops rebuild the allocations from the Services.")
	fs.DurationVar(&c.RepairDeadline, "service-ip-repair-deadline", c.RepairDeadline, "How long the first repair passes may take; /readyz fails until they succeed, and past this the server exits.")

	// kube-apiserver's: --client-ca-file (CAs accepted besides the
	// generated one), --token-auth-file, --service-account-issuer,
	// --service-account-key-file, --service-account-lookup, ...
	c.Authentication.AddFlags(fs)
	fs.Lookup("service-account-issuer").Usage += " Default: https://kubernetes.default.svc.cluster.local."
	fs.StringVar(&c.ServiceAccountSigningKeyFile, "service-account-signing-key-file", c.ServiceAccountSigningKeyFile, "Path to the file that contains the current private key of the service account token issuer. Default: pki/sa.key in --data-dir, generated on first start.")
	c.Authorization.AddFlags(fs)
	c.Admission.AddFlags(fs)
	c.Features.AddFlags(fs)
	// kube-apiserver's: --audit-policy-file, --audit-log-*, --audit-webhook-*.
	c.Audit.AddFlags(fs)
	fs.Lookup("audit-policy-file").Usage += " Default: audit/policy.yaml in --data-dir, kubeboot's policy written on first start (metadata of every change, of credentials read, of exec and proxy); set it empty to record no events."
	fs.Lookup("audit-log-path").Usage += " Default, unless --audit-webhook-config-file is set: logs/audit.log in --data-dir; set it empty to record no events."

	fs.StringVar(&c.CRDDir, "crd-dir", c.CRDDir, "If set, a directory of CustomResourceDefinition manifests (.yaml, .yml, .json) to install at start; the server is ready only once they are established.")

	fs.DurationVar(&c.EventTTL, "event-ttl", c.EventTTL, "Amount of time to retain events.")
	fs.StringVar(&c.KubeletCertificateAuthority, "kubelet-certificate-authority", c.KubeletCertificateAuthority, "Path to a cert file for the certificate authority the kubelets' serving certificates are verified against. Default: the cluster CA (pki/ca.crt in --data-dir), which signs the serving certificates of kubeboot server's nodes.")
}

// Validate applies what the flags parsed into a registry rather than a
// setting, as kube-apiserver does first after parsing: --feature-gates and
// --emulated-version (an unknown gate or an emulated version out of range
// fails here). Every setting is checked when the configuration is
// completed (controlplane.Config.Complete).
func (o *APIServer) Validate() error {
	if err := o.ControlPlane.GenericServerRun.ComponentGlobalsRegistry.Set(); err != nil {
		return fmt.Errorf("--feature-gates, --emulated-version: %w", err)
	}
	return nil
}

// tokenEnv is the environment variable --token defaults to (k3s's
// K3S_TOKEN), read when the flags are, so that --help never shows it.
const tokenEnv = "KUBEBOOT_TOKEN"

// agentTokenEnv is --agent-token's (k3s's K3S_AGENT_TOKEN).
const agentTokenEnv = "KUBEBOOT_AGENT_TOKEN"

// Config returns the control plane configuration the flags describe.
func (o *APIServer) Config() controlplane.Config {
	c := o.ControlPlane
	if c.Token == "" && c.TokenFile == "" {
		c.Token = os.Getenv(tokenEnv)
	}
	if c.AgentToken == "" && c.AgentTokenFile == "" {
		c.AgentToken = os.Getenv(agentTokenEnv)
	}
	c.EtcdS3.Complete()
	// An audit policy or log given empty turns the default audit off, as
	// leaving them unset leaves kube-apiserver's off.
	for _, name := range []string{"audit-policy-file", "audit-log-path"} {
		if o.flags != nil && o.flags.Changed(name) && o.flags.Lookup(name).Value.String() == "" {
			c.DefaultAudit = false
		}
	}
	return c
}
