package operator_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeboot/kubeboot/kubeboottest"
	"github.com/kubeboot/kubeboot/kubeboottest/envtest"
	v2 "github.com/kubeboot/kubeboot/test/operator/api/v2"
)

// TestParallelServers: eight Environments in one test binary, started
// concurrently and all running at once, each with the CRDs, webhooks and
// its own operator; what one stores, the others do not see. (Subtests
// with t.Parallel would run only -parallel, GOMAXPROCS, at a time.)
func TestParallelServers(t *testing.T) {
	const servers = 8
	envs := make([]*envtest.Environment, servers)
	errs := make([]error, servers)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Go(func() {
			envs[i] = newEnvironment()
			envs[i].Controllers = nil
			_, errs[i] = envs[i].Start()
		})
	}
	wg.Wait()
	for i, env := range envs {
		if errs[i] != nil {
			t.Errorf("server %d: %v", i, errs[i])
			continue
		}
		t.Cleanup(func() {
			if err := env.Stop(); err != nil {
				t.Errorf("Stop: %v", err)
			}
		})
	}
	if t.Failed() {
		t.FailNow()
	}
	hosts := map[string]bool{}
	for _, env := range envs {
		hosts[env.Config.Host] = true
	}
	if len(hosts) != servers {
		t.Errorf("%d distinct server addresses for %d servers running at once", len(hosts), servers)
	}
	for i, env := range envs {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			c, err := startOperator(ctx, env)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Create(ctx, website("default", "too-big", 11)); !apierrors.IsInvalid(err) {
				t.Errorf("this server's webhook must refuse 11 replicas: err = %v", err)
			}
			name := fmt.Sprintf("site-%d", i)
			if err := c.Create(ctx, website("default", name, 1)); err != nil {
				t.Fatal(err)
			}
			list := &v2.WebsiteList{}
			if err := c.List(ctx, list); err != nil {
				t.Fatal(err)
			}
			if len(list.Items) != 1 || list.Items[0].Name != name {
				t.Errorf("Websites on server %d: %v, want only %s", i, list.Items, name)
			}
		})
	}
}

// exitingChildEnv makes the test binary a child that starts an
// Environment and exits without stopping it.
const exitingChildEnv = "KUBEBOOT_SAMPLE_EXITING_CHILD"

func runExitingChild() {
	env := newEnvironment()
	if _, err := env.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("server %s %s\n", env.Config.Host, env.Server.DataDir)
	os.Exit(3) // as a failing suite's TestMain would, with no Stop
}

// TestNoLeftovers: a test binary that exits without stopping its server
// leaves nothing running (the server lived in its process), and the
// directory it left is removed by the next server started.
func TestNoLeftovers(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), exitingChildEnv+"=1")
	out, err := cmd.Output()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 3 {
		t.Fatalf("child: %v (want exit status 3); stderr:\n%s", err, stderrOf(err))
	}
	var host, dataDir string
	for sc := bufio.NewScanner(strings.NewReader(string(out))); sc.Scan(); {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "server" {
			host, dataDir = f[1], f[2]
		}
	}
	if host == "" {
		t.Fatalf("the child printed no server line:\n%s", out)
	}
	u, err := url.Parse(host)
	if err != nil {
		t.Fatal(err)
	}
	if conn, err := net.Dial("tcp", u.Host); err == nil {
		conn.Close()
		t.Errorf("something still listens on %s after the child exited", u.Host)
	}
	if _, err := os.Stat(dataDir); err != nil {
		t.Fatalf("the child's data dir %s: %v; want it left by os.Exit, for the sweep to find", dataDir, err)
	}
	srv, err := kubeboottest.StartServer(kubeboottest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Errorf("the child's data dir %s after the next server started: %v, want it removed", dataDir, err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(srv.DataDir); !os.IsNotExist(err) {
		t.Errorf("data dir %s after Stop: %v, want it removed", srv.DataDir, err)
	}
	// A client of the stopped server gets an error, not a hang.
	c, err := client.New(srv.Config, client.Options{})
	if err == nil {
		err = c.Get(context.Background(), client.ObjectKey{Name: "default"}, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}})
	}
	if err == nil {
		t.Error("the stopped server still answers")
	}
}

func stderrOf(err error) string {
	if exit, ok := err.(*exec.ExitError); ok {
		return string(exit.Stderr)
	}
	return ""
}
