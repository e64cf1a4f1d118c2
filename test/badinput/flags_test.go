package badinput

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeboot/kubeboot/test/harness"
)

// TestBadFlags runs `kubeboot apiserver` with one bad flag each: an
// unknown flag, a value of the wrong type, or a value out of range. Each
// must exit non-zero with exactly one line on stderr naming the flag, and
// must not create the data dir (nothing is written before the flags are
// known good).
func TestBadFlags(t *testing.T) {
	t.Parallel()
	binary(t) // build once, before the subtests start in parallel

	// Files some cases point flags at.
	files := t.TempDir()
	badCSV := filepath.Join(files, "tokens.csv")
	if err := os.WriteFile(badCSV, []byte("only-a-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(files, "ca.crt")
	if err := os.WriteFile(notPEM, []byte("this is not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	someFile := filepath.Join(files, "client.crt")
	if err := os.WriteFile(someFile, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(files, "missing")
	badPolicy := filepath.Join(files, "policy.yaml")
	if err := os.WriteFile(badPolicy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Loud\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badEncryption := filepath.Join(files, "encryption.yaml")
	if err := os.WriteFile(badEncryption, []byte("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - aescbc:\n      keys:\n      - name: k\n        secret: too-short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badCRDs := filepath.Join(files, "crds")
	if err := os.Mkdir(badCRDs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(badCRDs, "crd.yaml"), []byte("apiVersion: apiextensions.k8s.io/v1\nkind: [CustomResourceDefinition\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	unknownKey := filepath.Join(files, "config.yaml")
	if err := os.WriteFile(unknownKey, []byte("secure-port: 6443\nsecure-prot: 7443\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	notYAML := filepath.Join(files, "config-not-yaml.yaml")
	if err := os.WriteFile(notYAML, []byte("secure-port: [6443\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		args []string
		// flag is what the one line must name.
		flag string
	}{
		// Unknown flags and arguments.
		{"config file with an unknown key", []string{"--config=" + unknownKey}, `unknown key "secure-prot"`},
		{"config file that is not YAML", []string{"--config=" + notYAML}, "--config " + notYAML},
		{"missing config file", []string{"--config=" + filepath.Join(files, "missing.yaml")}, "--config"},
		{"unknown flag", []string{"--bogus-flag"}, "--bogus-flag"},
		{"unknown flag with a value", []string{"--bogus=1"}, "--bogus"},
		{"unknown shorthand", []string{"-x"}, "-x"},
		{"removed kube-apiserver flag", []string{"--insecure-port=8080"}, "--insecure-port"},
		{"positional argument", []string{"extra"}, "extra"},

		// Values of the wrong type.
		{"port not a number", []string{"--secure-port=https"}, "--secure-port"},
		{"port empty", []string{"--secure-port="}, "--secure-port"},
		{"bind address not an IP", []string{"--bind-address=not-an-ip"}, "--bind-address"},
		{"advertise address not an IP", []string{"--advertise-address=1.2.3"}, "--advertise-address"},
		{"apiserver count not a number", []string{"--apiserver-count=two"}, "--apiserver-count"},
		{"node port not an integer", []string{"--kubernetes-service-node-port=1.5"}, "--kubernetes-service-node-port"},
		{"lease TTL without a unit", []string{"--endpoint-lease-ttl=5"}, "--endpoint-lease-ttl"},
		{"reconcile interval not a duration", []string{"--endpoint-reconciler-interval=soon"}, "--endpoint-reconciler-interval"},
		{"event TTL with a bad unit", []string{"--event-ttl=1x"}, "--event-ttl"},
		{"watch cache not a bool", []string{"--watch-cache=maybe"}, "--watch-cache"},
		{"repair interval not a duration", []string{"--service-ip-repair-interval=fast"}, "--service-ip-repair-interval"},
		{"shutdown delay not a duration", []string{"--shutdown-delay-duration=abc"}, "--shutdown-delay-duration"},
		{"verbosity not a number", []string{"--v=loud"}, "--v"},
		{"emulated version not a version", []string{"--emulated-version=x"}, "--emulated-version"},

		// Values out of range or otherwise invalid.
		{"port above 65535", []string{"--secure-port=70000"}, "--secure-port"},
		{"negative port", []string{"--secure-port=-1"}, "--secure-port"},
		{"service range under 8 addresses", []string{"--service-cluster-ip-range=10.0.0.0/30"}, "--service-cluster-ip-range"},
		{"service range over 2^20 addresses", []string{"--service-cluster-ip-range=10.0.0.0/8"}, "--service-cluster-ip-range"},
		{"service range not a CIDR", []string{"--service-cluster-ip-range=not-a-cidr"}, "--service-cluster-ip-range"},
		{"two service ranges of one family", []string{"--service-cluster-ip-range=10.0.0.0/24,10.1.0.0/24"}, "--service-cluster-ip-range"},
		{"three service ranges", []string{"--service-cluster-ip-range=10.0.0.0/24,fd00::/108,10.2.0.0/24"}, "--service-cluster-ip-range"},
		{"node port range reversed", []string{"--service-node-port-range=32767-30000"}, "--service-node-port-range"},
		{"node port range past 65535", []string{"--service-node-port-range=30000-70000"}, "--service-node-port-range"},
		{"node port range not a range", []string{"--service-node-port-range=abc"}, "--service-node-port-range"},
		{"kubernetes node port outside the range", []string{"--kubernetes-service-node-port=80"}, "--kubernetes-service-node-port"},
		{"negative kubernetes node port", []string{"--kubernetes-service-node-port=-1"}, "--kubernetes-service-node-port"},
		{"unknown reconciler", []string{"--endpoint-reconciler-type=magic"}, "--endpoint-reconciler-type"},
		{"negative apiserver count", []string{"--apiserver-count=-1"}, "--apiserver-count"},
		{"negative lease TTL", []string{"--endpoint-lease-ttl=-1s"}, "--endpoint-lease-ttl"},
		{"lease TTL under a second", []string{"--endpoint-lease-ttl=100ms"}, "--endpoint-lease-ttl"},
		{"negative reconcile interval", []string{"--endpoint-reconciler-interval=-1s"}, "--endpoint-reconciler-interval"},
		{"negative event TTL", []string{"--event-ttl=-1h"}, "--event-ttl"},
		{"negative repair interval", []string{"--service-ip-repair-interval=-1s"}, "--service-ip-repair-interval"},
		{"zero repair deadline", []string{"--service-ip-repair-deadline=0s"}, "--service-ip-repair-deadline"},
		{"negative shutdown delay", []string{"--shutdown-delay-duration=-1s"}, "--shutdown-delay-duration"},
		{"negative max requests in flight", []string{"--max-requests-inflight=-1"}, "--max-requests-inflight"},
		{"goaway chance above 0.02", []string{"--goaway-chance=0.5"}, "--goaway-chance"},
		{"cors origin not pinned", []string{"--cors-allowed-origins=example.com"}, "--cors-allowed-origins"},
		{"unspecified advertise address", []string{"--advertise-address=0.0.0.0"}, "--advertise-address"},
		{"loopback advertise address", []string{"--advertise-address=127.0.0.1"}, "--advertise-address"},
		{"unknown feature gate", []string{"--feature-gates=Bogus=true"}, "--feature-gates"},
		{"empty data dir", []string{"--data-dir="}, "--data-dir"},
		{"missing token file", []string{"--token-auth-file=" + missing}, "--token-auth-file"},
		{"token file that is not a token CSV", []string{"--token-auth-file=" + badCSV}, "--token-auth-file"},
		{"missing client CA file", []string{"--client-ca-file=" + missing}, "--client-ca-file"},
		{"client CA file that is not PEM", []string{"--client-ca-file=" + notPEM}, "--client-ca-file"},
		{"missing CRD directory", []string{"--crd-dir=" + missing}, "--crd-dir"},
		{"CRD directory that is a file", []string{"--crd-dir=" + someFile}, "--crd-dir"},
		{"CRD directory with a malformed manifest", []string{"--crd-dir=" + badCRDs}, "--crd-dir"},
		{"etcd CA file without etcd servers", []string{"--etcd-cafile=" + someFile}, "--etcd-cafile"},
		// Joining a cluster, refused before anything is written.
		{"join without a token", []string{"--server=https://198.51.100.1:6443"}, "--server"},
		{"join with a token without the CA hash", []string{"--server=https://198.51.100.1:6443", "--token=secret"}, "--token"},
		{"join with a missing token file", []string{"--server=https://198.51.100.1:6443", "--token-file=" + missing}, "--token-file"},
		{"join over http", []string{"--server=http://198.51.100.1:6443", "--token=K10" + strings.Repeat("a", 64) + "::server:p"}, "--server"},
		{"cluster-init and join", []string{"--cluster-init", "--server=https://198.51.100.1:6443"}, "--cluster-init"},
		{"cluster-init with a token", []string{"--cluster-init", "--token=K10" + strings.Repeat("a", 64) + "::server:p"}, "--token"},
		{"cluster-init on external etcd", []string{"--cluster-init", "--etcd-servers=http://127.0.0.1:2379"}, "--cluster-init"},
		{"a token without a server", []string{"--token=K10" + strings.Repeat("a", 64) + "::server:p"}, "--token"},
		{"snapshot schedule that is not cron", []string{"--etcd-snapshot-schedule-cron=every noon"}, "--etcd-snapshot-schedule-cron"},
		{"snapshot retention of 0", []string{"--etcd-snapshot-retention=0"}, "--etcd-snapshot-retention"},
		{"negative etcd quota", []string{"--etcd-quota-backend-bytes=-1"}, "--etcd-quota-backend-bytes"},
		{"etcd quota on external etcd", []string{"--etcd-quota-backend-bytes=1000000", "--etcd-servers=http://127.0.0.1:2379"}, "--etcd-quota-backend-bytes"},
		{"restore path without cluster reset", []string{"--cluster-reset-restore-path=" + someFile}, "--cluster-reset-restore-path"},
		{"restore of a file that is no snapshot", []string{"--cluster-reset", "--cluster-reset-restore-path=" + someFile}, "--cluster-reset-restore-path"},
		{"cluster reset of a data dir without etcd data", []string{"--cluster-reset"}, "--cluster-reset"},
		// Security settings, refused before anything is written.
		{"audit policy with an unknown level", []string{"--audit-policy-file=" + badPolicy}, "--audit-policy-file"},
		{"missing audit policy", []string{"--audit-policy-file=" + missing}, "--audit-policy-file"},
		{"encryption config with a short key", []string{"--encryption-provider-config=" + badEncryption}, "--encryption-provider-config"},
		{"missing encryption config", []string{"--encryption-provider-config=" + missing}, "--encryption-provider-config"},
		{"reload without an encryption config", []string{"--encryption-provider-config-automatic-reload"}, "--encryption-provider-config"},
		{"secrets encryption and an encryption config", []string{"--secrets-encryption", "--encryption-provider-config=" + badEncryption}, "--secrets-encryption"},
		{"secrets encryption with an unknown provider", []string{"--secrets-encryption", "--secrets-encryption-provider=aesgcm"}, "--secrets-encryption-provider"},
		{"secrets encryption provider without secrets encryption", []string{"--secrets-encryption-provider=secretbox"}, "--secrets-encryption-provider secretbox needs --secrets-encryption"},
		{"serving certificate that is not PEM", []string{"--tls-cert-file=" + notPEM, "--tls-private-key-file=" + notPEM}, "--tls-cert-file"},
		{"serving certificate without its key", []string{"--tls-cert-file=" + notPEM}, "--tls-private-key-file"},
		{"memory limit not a size", []string{"--memory-limit=lots"}, "--memory-limit"},
		{"memory limit above the machine's", []string{"--memory-limit=150%"}, "--memory-limit"},
		{"unknown TLS version", []string{"--tls-min-version=VersionTLS14"}, "--tls-min-version"},
		{"unknown cipher suite", []string{"--tls-cipher-suites=TLS_NOT_A_CIPHER"}, "--tls-cipher-suites"},
		{"etcd certificate without its key", []string{"--etcd-servers=https://127.0.0.1:1", "--etcd-certfile=" + someFile}, "--etcd-keyfile"},
		// `kubeboot server`'s own flags, which the apiserver alone has not.
		{"simulated nodes on the apiserver alone", []string{"--simulated-nodes=1"}, "--simulated-nodes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dataDir := filepath.Join(t.TempDir(), "data")
			// The case's flags come last: for a flag given twice, the last
			// value counts.
			checkRefused(t, apiserverArgs(dataDir, tt.args...), dataDir, tt.flag)
		})
	}
}

// TestBadServerFlags is TestBadFlags for the flags of `kubeboot server`
// that `kubeboot apiserver` has not: those of the simulated nodes.
func TestBadServerFlags(t *testing.T) {
	t.Parallel()
	binary(t) // build once, before the subtests start in parallel
	registries := badRegistries(t)

	tests := []struct {
		name string
		args []string
		// flag is what the one line must name.
		flag string
	}{
		// Values of the wrong type.
		{"simulated node count not a number", []string{"--simulated-nodes=three"}, "--simulated-nodes"},
		{"simulated node lease duration without a unit", []string{"--simulated-node-lease-duration=40"}, "--simulated-node-lease-duration"},
		{"simulated pod startup delay not a duration", []string{"--simulated-pod-startup-delay=soon"}, "--simulated-pod-startup-delay"},

		// Values out of range or otherwise invalid.
		{"negative simulated node count", []string{"--simulated-nodes=-1"}, "--simulated-nodes"},
		{"simulated node CIDR not a CIDR", []string{"--simulated-node-cidr=not-a-cidr"}, "--simulated-node-cidr"},
		{"simulated node CIDR an address", []string{"--simulated-node-cidr=10.128.0.0"}, "--simulated-node-cidr"},
		{"simulated node CIDR IPv6", []string{"--simulated-node-cidr=fd00::/48"}, "--simulated-node-cidr"},
		{"simulated node CIDR smaller than a /24", []string{"--simulated-node-cidr=10.128.0.0/25"}, "--simulated-node-cidr"},
		{"simulated node CIDR too small for the count", []string{"--allocate-node-cidrs=false", "--flannel-backend=none", "--simulated-nodes=3", "--simulated-node-cidr=10.128.0.0/23"}, "--simulated-node-cidr"},
		// The default, 10.128.0.0/10, holds 16384 /24s.
		{"default simulated node CIDR too small for the count", []string{"--allocate-node-cidrs=false", "--flannel-backend=none", "--simulated-nodes=16385"}, "--simulated-node-cidr"},
		{"cluster CIDR too small for the simulated nodes", []string{"--cluster-cidr=10.42.0.0/16", "--simulated-nodes=257"}, "--cluster-cidr"},
		// Without --cluster-cidr, node IPAM takes --simulated-node-cidr's
		// range when its default is too small.
		{"simulated node CIDR too small for the count with node IPAM", []string{"--simulated-nodes=16385"}, "--simulated-node-cidr"},
		// The pod network.
		{"unknown flannel backend", []string{"--flannel-backend=wireguard"}, "--flannel-backend"},
		{"pod network without node CIDRs", []string{"--allocate-node-cidrs=false"}, "--allocate-node-cidrs"},
		{"IPv6 cluster CIDR, IPv4 Services", []string{"--cluster-cidr=fd00:42::/56"}, "--cluster-cidr"},
		{"IPv6 masquerade without an IPv6 pod range", []string{"--flannel-ipv6-masq"}, "--flannel-ipv6-masq"},
		{"IPv6 masquerade without a pod network", []string{"--flannel-backend=none", "--flannel-ipv6-masq"}, "--flannel-ipv6-masq"},
		// Dual-stack: one range or address of each family, the Pods' of
		// the Services' families.
		{"cluster CIDRs of one family", []string{"--flannel-backend=none", "--cluster-cidr=10.42.0.0/16,10.43.0.0/16"}, "--cluster-cidr"},
		{"cluster CIDR of a family the Services lack", []string{"--flannel-backend=none", "--cluster-cidr=10.42.0.0/16,fd00:42::/56"}, "--cluster-cidr"},
		{"IPv6 Services, the IPv4 default cluster CIDR", []string{"--flannel-backend=none", "--service-cidr=fd00:43::/112"}, "--cluster-cidr"},
		{"cluster CIDRs' primary not the Services'", []string{"--flannel-backend=none", "--service-cidr=10.43.0.0/16,fd00:43::/112", "--cluster-cidr=fd00:42::/56,10.42.0.0/16"}, "--cluster-cidr"},
		{"Service CIDRs of one family, by k3s's name", []string{"--service-cidr=10.43.0.0/16,10.44.0.0/16"}, "--service-cluster-ip-range"},
		{"node IPs of one family", []string{"--node", "--node-ip=198.51.100.1,198.51.100.2"}, "--node-ip"},
		{"node IP not an address", []string{"--node", "--node-ip=node-a"}, "--node-ip"},
		{"node IP of a family the cluster lacks", []string{"--node", "--node-ip=2001:db8::1"}, "--node-ip"},
		{"node IP without --node", []string{"--node-ip=198.51.100.1"}, "--node-ip"},
		{"node external IP without --node", []string{"--node-external-ip=203.0.113.1"}, "--node-external-ip"},
		{"node external IPs of one family", []string{"--node", "--node-external-ip=203.0.113.1,203.0.113.2"}, "--node-external-ip"},
		{"node external IP of a family the cluster lacks", []string{"--node", "--node-external-ip=2001:db8::1"}, "--node-external-ip"},
		{"CNI configuration not absolute", []string{"--node", "--flannel-cni-conf=net.d/10.conflist"}, "--flannel-cni-conf"},
		{"zero simulated node lease duration", []string{"--simulated-node-lease-duration=0s"}, "--simulated-node-lease-duration"},
		{"simulated node lease duration under a second", []string{"--simulated-node-lease-duration=500ms"}, "--simulated-node-lease-duration"},
		{"negative simulated node lease duration", []string{"--simulated-node-lease-duration=-40s"}, "--simulated-node-lease-duration"},
		{"negative simulated pod startup delay", []string{"--simulated-pod-startup-delay=-1s"}, "--simulated-pod-startup-delay"},

		// The host's node (--node): flags the kubelet and kube-proxy refuse
		// are refused before anything starts.
		{"kubelet flag without --node", []string{"--kubelet-arg=--v=2"}, "--kubelet-arg"},
		{"proxy flag without --node", []string{"--proxy-arg=--v=2"}, "--proxy-arg"},
		{"local storage path without --node", []string{"--default-local-storage-path=/srv/volumes"}, "--default-local-storage-path"},
		{"local storage path not absolute", []string{"--node", "--default-local-storage-path=volumes"}, "--default-local-storage-path"},
		{"unknown kubelet flag", []string{"--node", "--kubelet-arg=--no-such-flag=1"}, "--kubelet-arg"},
		{"kubelet flag of the wrong type", []string{"--node", "--kubelet-arg=--max-pods=many"}, "--kubelet-arg"},
		{"kubelet argument not a flag", []string{"--node", "--kubelet-arg=max-pods"}, "--kubelet-arg"},
		{"unknown kube-proxy flag", []string{"--node", "--proxy-arg=--no-such-flag=1"}, "--proxy-arg"},
		{"invalid kube-proxy mode", []string{"--node", "--proxy-arg=--proxy-mode=bogus"}, "--proxy-arg"},
		{"node without bootstrap tokens", []string{"--node", "--enable-bootstrap-token-auth=false"}, "--enable-bootstrap-token-auth"},
		{"node without CSR signing", []string{"--node", "--controllers=*,-certificatesigningrequest-signing-controller"}, "--controllers"},
		// Join tokens.
		{"agent token too short", []string{"--agent-token=short"}, "--agent-token"},
		{"agent token of the server's user", []string{"--agent-token=K10" + strings.Repeat("0", 64) + "::server:a-long-enough-password"}, "--agent-token"},
		{"agent token and its file", []string{"--agent-token=a-long-enough-password", "--agent-token-file=/nonexistent"}, "--agent-token"},
		{"server joining with an agent token", []string{"--server=https://127.0.0.1:1", "--token=K10" + strings.Repeat("0", 64) + "::node:a-long-enough-password"}, "--token"},
		// Snapshots to S3.
		{"S3 without a bucket", []string{"--etcd-s3"}, "--etcd-s3-bucket"},
		{"S3 endpoint a URL", []string{"--etcd-s3", "--etcd-s3-bucket=b", "--etcd-s3-endpoint=https://s3.example.test"}, "--etcd-s3-endpoint"},
		{"S3 endpoint CA missing", []string{"--etcd-s3", "--etcd-s3-bucket=b", "--etcd-s3-endpoint-ca=/nonexistent/ca.crt"}, "--etcd-s3-endpoint-ca"},
		{"S3 timeout zero", []string{"--etcd-s3", "--etcd-s3-bucket=b", "--etcd-s3-timeout=0s"}, "--etcd-s3-timeout"},
		{"S3 access key without a secret key", []string{"--etcd-s3", "--etcd-s3-bucket=b", "--etcd-s3-access-key=AK"}, "--etcd-s3-secret-key"},
		// Cluster DNS.
		{"cluster DNS outside the Service range", []string{"--cluster-dns=192.0.2.10"}, "--cluster-dns"},
		{"cluster DNS not an IP", []string{"--cluster-dns=ten"}, "--cluster-dns"},
		{"cluster DNS addresses of one family", []string{"--cluster-dns=10.96.0.10,10.96.0.11"}, "--cluster-dns"},
		{"cluster DNS of a family the Services lack", []string{"--cluster-dns=10.96.0.10,fd00:96::a"}, "--cluster-dns"},
		{"cluster DNS outside the Service range of its family", []string{"--service-cidr=10.96.0.0/16,fd00:96::/112", "--cluster-cidr=10.42.0.0/16,fd00:42::/56", "--cluster-dns=10.96.0.10,fd00:97::a"}, "--cluster-dns"},
		{"cluster domain not a domain", []string{"--cluster-domain=Cluster_Local"}, "--cluster-domain"},
		{"cluster DNS port out of range", []string{"--cluster-dns-port=70000"}, "--cluster-dns-port"},
		{"cluster DNS upstream not an address", []string{"--cluster-dns-upstream=dns.example"}, "--cluster-dns-upstream"},
		{"piece to disable neither built in nor a file name", []string{"--disable=charts/traefik"}, "--disable"},
		// Traffic in.
		{"Gateways' address range neither a prefix nor a range", []string{"--gateway-addresses=ten"}, "--gateway-addresses"},
		{"Gateways' address range backwards", []string{"--gateway-addresses=198.51.100.120-198.51.100.100"}, "--gateway-addresses"},
		{"Gateway API channel unknown", []string{"--gateway-api-channel=beta"}, "--gateway-api-channel"},
		{"Ingress port out of range", []string{"--ingress-http-port=70000"}, "--ingress-http-port"},
		{"Ingress ports the same", []string{"--ingress-http-port=8443", "--ingress-https-port=8443"}, "--ingress-http-port"},
		// metrics-server.
		{"unknown metrics-server flag", []string{"--metrics-server-arg=--no-such-flag=1"}, "--metrics-server-arg"},
		{"metrics-server flag not forwarded", []string{"--metrics-server-arg=--kubeconfig=/tmp/k"}, "--metrics-server-arg"},
		{"metric resolution under metrics-server's least", []string{"--metrics-server-arg=--metric-resolution=5s"}, "--metric-resolution"},
		{"kubelet timeout past the metric resolution", []string{"--metrics-server-arg=--metric-resolution=10s"}, "--kubelet-request-timeout"},
		// kube-controller-manager: leader migration hands controllers to a
		// cloud-controller-manager, which kubeboot does not run.
		{"controller manager leader migration", []string{"--controller-manager-arg=--enable-leader-migration"}, "--enable-leader-migration"},
		// A host without a runtime at the endpoint (any host): one line.
		{"node on a host without a runtime", []string{"--node", "--container-runtime-endpoint=unix:///nonexistent/cri.sock"}, "--node"},
		// The node's runtime.
		{"runtime endpoint as a kubelet flag", []string{"--node", "--kubelet-arg=--container-runtime-endpoint=unix:///run/crio/crio.sock"}, "give --container-runtime-endpoint"},
		{"runtime endpoint not a socket", []string{"--node", "--container-runtime-endpoint=/run/crio/crio.sock"}, "--container-runtime-endpoint"},
		{"unknown snapshotter", []string{"--node", "--snapshotter=zfs"}, "--snapshotter"},
		{"pause image without a node", []string{"--pause-image=example.test/pause:1"}, "--pause-image"},
		{"registries without a node", []string{"--private-registry=" + registries["unknown key"]}, "--private-registry"},
		{"registries.yaml missing", []string{"--node", "--private-registry=/nonexistent/registries.yaml"}, "--private-registry"},
		{"registries.yaml not YAML", []string{"--node", "--private-registry=" + registries["not YAML"]}, "--private-registry"},
		{"registries.yaml unknown key", []string{"--node", "--private-registry=" + registries["unknown key"]}, `unknown field "endpoints"`},
		{"registries.yaml endpoint not a URL", []string{"--node", "--private-registry=" + registries["endpoint not a URL"]}, "mirrors.docker.io.endpoint[0]"},
		{"registries.yaml CA missing", []string{"--node", "--private-registry=" + registries["CA missing"]}, "configs.mirror.test.tls.ca_file"},
		{"registries.yaml rewrite not a regexp", []string{"--node", "--private-registry=" + registries["rewrite not a regexp"]}, `mirrors.docker.io.rewrite["^(library"]`},
		{"registries.yaml rewrite without endpoints", []string{"--node", "--private-registry=" + registries["rewrite no endpoint"]}, "mirrors.docker.io.rewrite: rewrites apply to the mirror's endpoints"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dataDir := filepath.Join(t.TempDir(), "data")
			args := append([]string{"server", "--data-dir", dataDir}, serveFlags()...)
			checkRefused(t, append(args, tt.args...), dataDir, tt.flag)
		})
	}
}

// checkRefused runs kubeboot with args: it must exit non-zero with
// exactly one line on stderr naming flag, without creating dataDir.
func checkRefused(t *testing.T, args []string, dataDir, flag string) {
	t.Helper()
	res := runKubeboot(t, args...)
	cmdline := "kubeboot " + strings.Join(args, " ")
	if !res.started {
		if res.exitCode == 0 {
			t.Errorf("%s: exit 0, want non-zero\nstderr:\n%s", cmdline, res.stderr)
		}
		lines := stderrLines(res.stderr)
		if len(lines) != 1 {
			t.Errorf("%s: %d lines on stderr, want exactly 1:\n%s", cmdline, len(lines), res.stderr)
		}
		if !strings.Contains(res.stderr, flag) {
			t.Errorf("%s: stderr does not name %s:\n%s", cmdline, flag, res.stderr)
		}
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Errorf("%s: the data dir was created before the flags were checked (stat: %v)", cmdline, err)
	}
}

// TestBadAgentFlags runs `kubeboot agent` with one bad flag each: one
// line on stderr naming the flag, and no data dir.
func TestBadAgentFlags(t *testing.T) {
	t.Parallel()
	binary(t) // build once, before the subtests start in parallel
	registries := badRegistries(t)
	const token = "K100000000000000000000000000000000000000000000000000000000000000000::server:secret"
	join := []string{"--server=https://127.0.0.1:1", "--token=" + token}
	for _, tt := range []struct {
		name string
		args []string
		flag string
	}{
		{"no server", []string{"--token=" + token}, "--server"},
		{"server not https", []string{"--server=http://127.0.0.1:6443", "--token=" + token}, "--server"},
		{"no token", []string{"--server=https://127.0.0.1:6443"}, "--token"},
		{"token without a CA hash", []string{"--server=https://127.0.0.1:6443", "--token=secret"}, "--token"},
		{"token of an unknown user", []string{"--server=https://127.0.0.1:6443", "--token=K10" + strings.Repeat("0", 64) + "::admin:secret"}, "--token"},
		{"token and token file", append(join, "--token-file=/nonexistent"), "--token-file"},
		{"node IP not an IP", append(join, "--node-ip=10.0.0"), "--node-ip"},
		{"node IPs of one family", append(join, "--node-ip=198.51.100.1,198.51.100.2"), "--node-ip"},
		{"kubelet's node IPs of one family", append(join, "--kubelet-arg=--node-ip=2001:db8::1,2001:db8::2"), "--kubelet-arg=--node-ip"},
		{"taint without an effect", append(join, "--node-taint=dedicated=edge"), "--node-taint"},
		{"taint removal", append(join, "--node-taint=dedicated-"), "--node-taint"},
		{"unknown kubelet flag", append(join, "--kubelet-arg=--no-such-flag=1"), "--kubelet-arg"},
		{"local storage path not absolute", append(join, "--default-local-storage-path=volumes"), "--default-local-storage-path"},
		{"unknown kube-proxy flag", append(join, "--proxy-arg=--no-such-flag=1"), "--proxy-arg"},
		{"host without a runtime", append(join, "--container-runtime-endpoint=unix:///nonexistent/cri.sock"), "cannot run the kubelet"},
		{"registries.yaml unknown key", append(join, "--private-registry="+registries["unknown key"]), `unknown field "endpoints"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dataDir := filepath.Join(t.TempDir(), "agent")
			checkRefused(t, append([]string{"agent", "--data-dir", dataDir}, tt.args...), dataDir, tt.flag)
		})
	}
}

// badRegistries writes registries.yaml files a node must refuse, by what
// is wrong with them.
func badRegistries(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{}
	for name, content := range map[string]string{
		"not YAML":             "mirrors: [",
		"unknown key":          "mirrors:\n  docker.io:\n    endpoints: [\"https://mirror.test\"]\n",
		"endpoint not a URL":   "mirrors:\n  docker.io:\n    endpoint: [\"mirror.test:5000\"]\n",
		"CA missing":           "configs:\n  mirror.test:\n    tls:\n      ca_file: /nonexistent/ca.crt\n",
		"rewrite not a regexp": "mirrors:\n  docker.io:\n    endpoint: [\"https://mirror.test\"]\n    rewrite:\n      \"^(library\": \"x/$1\"\n",
		"rewrite no endpoint":  "mirrors:\n  docker.io:\n    rewrite:\n      \"^library/(.*)\": \"x/$1\"\n",
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		files[name] = path
	}
	return files
}

// TestNodeWithoutIPv6: `server --node` of a cluster with an IPv6 pod range
// on a host with IPv6 turned off (here, its network namespace's
// net.ipv6.conf.all.disable_ipv6) is refused in one line that says so,
// before anything starts.
func TestNodeWithoutIPv6(t *testing.T) {
	if !harness.InNetNS(t) {
		return
	}
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/all/disable_ipv6", []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	args := append([]string{"server", "--data-dir", dataDir}, serveFlags()...)
	checkRefused(t, append(args, "--node", "--service-cidr=10.96.0.0/16,fd00:96::/112", "--cluster-cidr=10.42.0.0/16,fd00:42::/56"),
		dataDir, "IPv6 turned off")
}
