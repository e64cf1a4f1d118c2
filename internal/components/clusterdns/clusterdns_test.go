package clusterdns

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
)

// lockedBuffer is klog's output in the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestStartKeepsTheProcessLogsInKlogsFormat starts CoreDNS on an API
// server that is not there, so that its start waits out the kubernetes
// plugin's startup_timeout, and logs through klog meanwhile, as the
// process's other components do: every line must reach klog's output in
// klog's format, none CoreDNS's log.
func TestStartKeepsTheProcessLogsInKlogsFormat(t *testing.T) {
	// A port nothing listens on: the plugin's informers never sync.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	apiserver := l.Addr().String()
	l.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://" + apiserver, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	port, err := freePort([]netip.Addr{netip.MustParseAddr("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	corefile := fmt.Sprintf(".:%d {\n    bind 127.0.0.1\n    kubernetes cluster.local {\n        kubeconfig %s\n        startup_timeout 1s\n    }\n}\n", port, kubeconfig)

	out := &lockedBuffer{}
	klog.LogToStderr(false)
	klog.SetOutput(out)
	t.Cleanup(func() {
		klog.SetOutput(os.Stderr)
		klog.LogToStderr(true)
	})

	started, done := make(chan struct{}), make(chan struct{})
	logged := 0
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-started:
				return
			case <-tick.C:
				klog.InfoS("Probe", "n", logged)
				logged++
			}
		}
	}()
	instance, err := start(corefile)
	close(started)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	defer instance.Stop() //nolint:errcheck // the test's end

	// The plugin's setup points klog at CoreDNS's log before setUp's
	// callback can give it back: a line or two logged in that window (a
	// few milliseconds on a loaded machine, CI saw one) go to CoreDNS's
	// log. The wait for its informers that follows, a second here, must
	// not.
	const window = 2
	probe := regexp.MustCompile(`(?m)^I\d{4} [0-9:.]+ +\d+ \S+\] "Probe" n=\d+$`)
	if got := len(probe.FindAllString(out.String(), -1)); got < logged-window || logged < 50 {
		t.Errorf("klog's output has %d of the %d lines logged while CoreDNS started (want all but the %d of the plugin's setup, at least 50 over its 1 s startup_timeout):\n%s",
			got, logged, window, firstLines(out.String(), 20))
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
