// Package throughput measures how fast kubeboot creates Services: 2,000
// Services at concurrency 32 through client-go, once ClusterIP and once
// NodePort, against a kubeboot apiserver process on embedded etcd; and
// Secrets, with and without encryption at rest, and with and without the
// default audit log.
//
//	go test ./bench/throughput -run '^$' -bench . -benchtime 1x
//
// Each benchmark reports creates/s, the p50 and p99 latency of one create
// and the process's peak RSS (VmHWM, embedded etcd included). With -peer,
// every iteration also runs the same creates against kube-apiserver
// 1.37.2 built from the module graph (on an etcd member in the benchmark
// process, so its peak RSS is the apiserver's alone), right after
// kubeboot, and reports its creates/s and peak RSS and kubeboot's ratio to
// it:
//
//	go test ./bench/throughput -run '^$' -bench . -benchtime 3x -args -peer
package throughput

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/bench/internal/benchserver"
	"github.com/kubeboot/kubeboot/test/harness"
)

const (
	services    = 2000
	concurrency = 32
	serviceCIDR = "10.96.0.0/16"
)

var peer = flag.Bool("peer", false, "also run kube-apiserver 1.37.2 in every iteration and report the ratio")

func TestMain(m *testing.M) { harness.Main(m) }

func BenchmarkCreateClusterIPServices(b *testing.B) {
	benchmarkCreates(b, corev1.ServiceTypeClusterIP)
}

func BenchmarkCreateNodePortServices(b *testing.B) {
	benchmarkCreates(b, corev1.ServiceTypeNodePort)
}

func benchmarkCreates(b *testing.B, typ corev1.ServiceType) {
	kubeboot := benchserver.APIServer(b, time.Minute, "--service-cluster-ip-range", serviceCIDR)
	var peerAPIServer benchserver.PeerAPIServer
	if *peer {
		peerAPIServer = benchserver.BuildPeerAPIServer(b, "--service-cluster-ip-range="+serviceCIDR)
	}
	var ours, theirs, ourPeaks, theirPeaks []float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		srv := kubeboot.Start(b)
		b.StartTimer()
		rate, latencies := measure(b, benchserver.CreateService(srv.MustClient(b), typ))
		b.StopTimer()
		ours = append(ours, rate)
		b.ReportMetric(benchserver.Percentile(latencies, 50), "p50-ms")
		b.ReportMetric(benchserver.Percentile(latencies, 99), "p99-ms")
		ourPeaks = append(ourPeaks, benchserver.MemoryOf(b, srv.PID()).Peak)
		benchserver.Stop(b, srv, 30*time.Second)
		if *peer {
			p := peerAPIServer.Start(b)
			client, err := kubernetes.NewForConfig(p.Config)
			if err != nil {
				b.Fatal(err)
			}
			rate, _ := measure(b, benchserver.CreateService(client, typ))
			theirs = append(theirs, rate)
			theirPeaks = append(theirPeaks, benchserver.MemoryOf(b, p.PID()).Peak)
			p.Stop()
		}
	}
	b.ReportMetric(benchserver.Median(ours), "creates/s")
	b.ReportMetric(benchserver.Median(ourPeaks), "peak-RSS-MiB")
	if *peer {
		b.ReportMetric(benchserver.Median(theirs), "peer-creates/s")
		b.ReportMetric(benchserver.Median(theirPeaks), "peer-peak-RSS-MiB")
		b.ReportMetric(benchserver.Median(ours)/benchserver.Median(theirs), "ratio")
	}
}

// encryptionConfig encrypts Secrets with aescbc, the provider the CIS
// benchmark and k3s's --secrets-encryption use.
const encryptionConfig = `apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
- resources: [secrets]
  providers:
  - aescbc:
      keys:
      - name: key1
        secret: c2VjcmV0IGlzIHNlY3VyZSwgc2VjcmV0IGlzIHNlY3I=
  - identity: {}
`

// noAudit turns kubeboot's default audit log off.
const noAudit = "--audit-policy-file="

// BenchmarkCreateSecrets creates 2,000 Secrets (concurrency 32) on a
// kubeboot apiserver without encryption at rest and on one with aescbc
// (--encryption-provider-config), both without audit, one after the other
// in every iteration, and reports both rates and their ratio (issue 25's
// target: at least 0.8).
func BenchmarkCreateSecrets(b *testing.B) {
	config := filepath.Join(b.TempDir(), "encryption.yaml")
	if err := os.WriteFile(config, []byte(encryptionConfig), 0o600); err != nil {
		b.Fatal(err)
	}
	compareSecretCreates(b, "aescbc", []string{noAudit}, []string{noAudit, "--encryption-provider-config=" + config})
}

// BenchmarkCreateSecretsAudited is BenchmarkCreateSecrets for the default
// audit log (kubeboot's policy records every Secret create) against none.
func BenchmarkCreateSecretsAudited(b *testing.B) {
	compareSecretCreates(b, "audited", []string{noAudit}, nil)
}

// compareSecretCreates creates 2,000 Secrets on a kubeboot apiserver with
// args and on one with otherArgs, one after the other in every iteration,
// and reports the rates (the second's metric named for other) and their
// ratio.
func compareSecretCreates(b *testing.B, other string, args, otherArgs []string) {
	servers := []benchserver.Kubeboot{
		benchserver.APIServer(b, time.Minute, append([]string{"--service-cluster-ip-range", serviceCIDR}, args...)...),
		benchserver.APIServer(b, time.Minute, append([]string{"--service-cluster-ip-range", serviceCIDR}, otherArgs...)...),
	}
	rates := make([][]float64, len(servers))
	for i := 0; i < b.N; i++ {
		for j, kubeboot := range servers {
			b.StopTimer()
			srv := kubeboot.Start(b)
			client := srv.MustClient(b)
			b.StartTimer()
			rate, _ := measure(b, func(i int) error {
				_, err := client.CoreV1().Secrets("default").Create(context.Background(), &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("secret-%d", i)},
					StringData: map[string]string{"password": fmt.Sprintf("s3cret-%d", i)},
				}, metav1.CreateOptions{})
				return err
			})
			b.StopTimer()
			rates[j] = append(rates[j], rate)
			benchserver.Stop(b, srv, 30*time.Second)
		}
	}
	b.ReportMetric(benchserver.Median(rates[0]), "creates/s")
	b.ReportMetric(benchserver.Median(rates[1]), other+"-creates/s")
	b.ReportMetric(benchserver.Median(rates[1])/benchserver.Median(rates[0]), other+"-ratio")
}

// BenchmarkRotateKeys creates 10,000 Secrets on a kubeboot apiserver
// started with --secrets-encryption, then runs `kubeboot secrets-encrypt
// rotate-keys` on it, and reports how fast it re-encrypted them (issue
// 25's target: at least 1,000 Secrets/s; k3s documents about 5/s) and how
// long the whole rotation took, the waits for the server's two reloads of
// the configuration included.
func BenchmarkRotateKeys(b *testing.B) {
	const secrets = 10000
	kubeboot := benchserver.APIServer(b, time.Minute, "--service-cluster-ip-range", serviceCIDR, "--secrets-encryption")
	bin, err := harness.Binary()
	if err != nil {
		b.Fatal(err)
	}
	var rates, totals []float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		srv := kubeboot.Start(b)
		client := srv.MustClient(b)
		for created := 0; created < secrets; created += services {
			measure(b, func(i int) error {
				_, err := client.CoreV1().Secrets("default").Create(context.Background(), &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("secret-%d", created+i)},
					StringData: map[string]string{"password": fmt.Sprintf("s3cret-%d", created+i)},
				}, metav1.CreateOptions{})
				return err
			})
		}
		b.StartTimer()
		start := time.Now()
		out, err := exec.Command(bin, "secrets-encrypt", "rotate-keys", "--data-dir", srv.DataDir).CombinedOutput()
		total := time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatalf("rotate-keys: %v\n%s", err, out)
		}
		var n int
		var took time.Duration
		// The summary line; progress lines ("of") and the stage's
		// come before and after it.
		var line string
		for l := range strings.SplitSeq(string(out), "\n") {
			if strings.HasPrefix(l, "re-encrypted ") && !strings.Contains(l, " of ") {
				line = l
			}
		}
		if _, err := fmt.Sscanf(line, "re-encrypted %d Secrets in %s", &n, new(string)); err != nil || n != secrets {
			b.Fatalf("rotate-keys reported %q (%v), want %d Secrets re-encrypted", line, err, secrets)
		}
		took, err = time.ParseDuration(strings.Fields(line)[4])
		if err != nil {
			b.Fatalf("rotate-keys reported %q: %v", line, err)
		}
		rates = append(rates, float64(n)/took.Seconds())
		totals = append(totals, total.Seconds())
		benchserver.Stop(b, srv, 30*time.Second)
	}
	b.ReportMetric(benchserver.Median(rates), "reencrypted/s")
	b.ReportMetric(benchserver.Median(totals), "rotation-s")
}

// measure creates services Services (or Secrets) from concurrency
// workers.
func measure(b *testing.B, create func(i int) error) (float64, []time.Duration) {
	b.Helper()
	return benchserver.Creates(b, services, concurrency, create)
}
