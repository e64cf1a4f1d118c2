package etcd

import (
	"slices"
	"strings"
	"testing"
)

func TestArgs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       Config
		want, not []string
	}{{
		name: "a lone member",
		cfg:  Config{Dir: "/data/etcd"},
		want: []string{"--data-dir=/data/etcd", "--listen-client-urls=unix:///data/etcd/etcd.sock",
			"--listen-peer-urls=unix:///data/etcd/peer.sock", "--heartbeat-interval=10", "--election-timeout=50",
			"--snapshot-catchup-entries=100"},
		// etcd's defaults (off) are left out, as on its command line.
		not: []string{"--client-cert-auth", "--peer-client-cert-auth", "--peer-cert-file", "--auto-tls", "--force-new-cluster", "--name="},
	}, {
		name: "a member of a cluster",
		cfg: Config{Dir: "/data/etcd", Name: "s1", PeerURLs: []string{"https://198.51.100.1:2380"},
			InitialCluster: "s1=https://198.51.100.1:2380",
			PeerTLS:        TLSFiles{CertFile: "/pki/etcd/peer.crt", KeyFile: "/pki/etcd/peer.key", TrustedCAFile: "/pki/etcd/ca.crt", ClientCertAuth: true}},
		want: []string{"--name=s1", "--listen-peer-urls=https://198.51.100.1:2380", "--peer-cert-file=/pki/etcd/peer.crt",
			"--peer-key-file=/pki/etcd/peer.key", "--peer-trusted-ca-file=/pki/etcd/ca.crt", "--peer-client-cert-auth=true",
			"--initial-cluster=s1=https://198.51.100.1:2380"},
		// A follower catches up from etcd's 5,000 entries.
		not: []string{"--heartbeat-interval", "--peer-auto-tls", "--snapshot-catchup-entries"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			args, err := tc.cfg.Args()
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !slices.Contains(args, w) {
					t.Errorf("no %s in %q", w, args)
				}
			}
			for _, n := range tc.not {
				if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, n) }) {
					t.Errorf("%s in %q", n, args)
				}
			}
		})
	}
}
