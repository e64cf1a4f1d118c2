package differential

import (
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeboot/kubeboot/internal/components/kubecontrollermanager"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
	"github.com/kubeboot/kubeboot/test/harness"
)

// controllerStarting is kube-controller-manager's line for each controller
// it runs (at -v=1), once it has built them all: klog's
// `"Controller starting..." controller="x"`, or in kubeboot CoreDNS's
// `Controller starting... controller="x"` for a line that falls in the
// milliseconds CoreDNS's kubernetes plugin has klog process-wide while it
// sets up (clusterdns gives klog back right after; its test holds that).
var controllerStarting = regexp.MustCompile(`Controller starting\.\.\."? .*controller="([^"]+)"`)

// TestServerRunsTheControllersKubeControllerManagerRuns starts `kubeboot
// server` and the real kube-controller-manager 1.37.2 (with its apiserver,
// scheduler and etcd), both with their default controllers and kubeadm's
// settings, and compares the controllers each starts.
func TestServerRunsTheControllersKubeControllerManagerRuns(t *testing.T) {
	dir := t.TempDir()
	bins, err := harness.BuildPeerControlPlane(dir)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(dir, "kubeboot")
	srv := harness.StartReadyServer(t, time.Minute, bin, dataDir, "--secure-port=0", serviceRange, "-v=1")
	// kubeadm gives kube-controller-manager the cluster CA to sign CSRs
	// with, as kubeboot server does by default: kubeboot's CA serves. And
	// kubeboot's default --controllers (kubeadm's, less the TTL
	// controller), and k3s's pod CIDRs, which kubeboot's are.
	ca := filepath.Join(dataDir, "pki", pki.CAName)
	peer := harness.StartPeerControlPlane(t, bins, filepath.Join(dir, "peer"), harness.PeerArgs{ControllerManager: []string{"-v=1",
		"--controllers=" + strings.Join(kubecontrollermanager.DefaultControllers(), ","),
		"--allocate-node-cidrs", "--cluster-cidr=" + kubecontrollermanager.DefaultClusterCIDR,
		"--cluster-signing-cert-file=" + ca + ".crt", "--cluster-signing-key-file=" + ca + ".key", "--root-ca-file=" + ca + ".crt"}})

	// Each controller starts on a goroutine of its own: on a loaded machine
	// their lines can be seconds apart, so kubeboot's are awaited until they
	// include the peer's (or a minute passes) rather than until a quiet second.
	theirs := startedControllers(t, "kube-controller-manager", peer.ControllerManagerLogs, nil)
	ours := startedControllers(t, "kubeboot server", srv.Logs, theirs)
	if missing := theirs.Difference(ours); missing.Len() > 0 {
		t.Errorf("kube-controller-manager runs controllers kubeboot server does not: %v", sets.List(missing))
	}
	if extra := ours.Difference(theirs); extra.Len() > 0 {
		t.Errorf("kubeboot server runs controllers kube-controller-manager does not: %v", sets.List(extra))
	}
	t.Logf("both run %d controllers: %v", ours.Len(), sets.List(ours))
}

// startedControllers waits until logs shows controllers starting, including
// every one of want, and no more start for a second, and returns their names.
// When a minute passes first it returns those started so far, so that the
// caller reports what is missing.
func startedControllers(t *testing.T, who string, logs func() string, want sets.Set[string]) sets.Set[string] {
	t.Helper()
	var started []string
	stableSince := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		var now []string
		for _, m := range controllerStarting.FindAllStringSubmatch(logs(), -1) {
			now = append(now, m[1])
		}
		if !slices.Equal(now, started) {
			started, stableSince = now, time.Now()
		}
		return len(started) > 0 && sets.New(started...).IsSuperset(want) && time.Since(stableSince) > time.Second, nil
	})
	if len(started) == 0 {
		t.Fatalf("%s started no controllers within a minute: %v", who, err)
	}
	return sets.New(started...)
}
