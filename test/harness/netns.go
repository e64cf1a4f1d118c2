package harness

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// netnsEnv marks a process running inside the namespace made by InNetNS.
const netnsEnv = "KUBEBOOT_IN_NETNS"

// privateDevicePlugins gives a namespace's kubelet a device plugin
// directory of its own: the kubelet's is fixed, not under its
// --root-dir, and each kubelet empties it and listens there as it starts,
// so two nodes of one host starting together would take each other's
// socket ("bind: address already in use").
const privateDevicePlugins = "mkdir -p /var/lib/kubelet/device-plugins && mount -t tmpfs -o mode=0755 tmpfs /var/lib/kubelet/device-plugins"

// InNetNS runs the calling test again inside a new network namespace with
// lo up and addrs (e.g. "198.51.100.1", or "2001:db8::1") on it, and reports whether the
// caller is that child: the parent returns false after the child finished
// (its output is logged and its failure fails the parent), the child
// returns true and carries on with the test body.
//
// It needs unshare(1) and ip(8) and the right to create network namespaces
// (root). Without them the test is skipped, or fails when CI=true.
func InNetNS(t *testing.T, addrs ...string) bool {
	t.Helper()
	if os.Getenv(netnsEnv) == "1" {
		return true
	}
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipOrFail(t, fmt.Sprintf("%s not found: %v", tool, err))
			return false
		}
	}
	bin, err := Binary()
	if err != nil {
		t.Fatalf("building kubeboot: %v", err)
	}
	script := []string{"set -e", "ip link set lo up", privateDevicePlugins}
	for _, a := range addrs {
		if strings.Contains(a, ":") {
			// nodad: usable at once, without duplicate address detection.
			a += "/128 nodad"
		} else {
			a += "/32"
		}
		script = append(script, fmt.Sprintf("ip addr add %s dev lo", a))
	}
	script = append(script, `exec "$@"`)
	// A mount namespace too: what a kubelet mounts (volumes) goes with it.
	args := []string{"--net", "--mount", "--", "sh", "-c", strings.Join(script, "\n"), "sh", os.Args[0]}
	args = append(args, childTestArgs(t)...)
	cmd := exec.Command("unshare", args...)
	cmd.Env = append(os.Environ(), netnsEnv+"=1", BinEnv+"="+bin)
	// A test killed (its timeout) does not leave the namespace's
	// running: it gets SIGTERM, as it gets the signals this one does
	// meanwhile; a test that starts what would outlive it (containers)
	// handles them to run its cleanups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-signals:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	signal.Stop(signals)
	close(done)
	t.Log("output of the test in its network namespace:\n" + out.String())
	if err != nil {
		if strings.Contains(out.String(), "unshare failed") || strings.Contains(out.String(), "Operation not permitted") {
			skipOrFail(t, "cannot create a network namespace: "+err.Error())
			return false
		}
		// Its failures again, last: the output above can be long (the
		// servers' logs), and a CI log shows its end.
		t.Fatalf("test in network namespace failed: %v; its failures:\n%s", err, failures(out.String()))
	}
	if !strings.Contains(out.String(), "--- PASS: "+t.Name()) {
		t.Fatalf("test in network namespace did not pass")
	}
	return false
}

// failureLine is a line of `go test -v` output that tells a failure: a
// test's result, a panic, or a message logged with its file and line (as
// t.Error and t.Fatal write them; a klog line has its level first).
var failureLine = regexp.MustCompile(`^\s*(--- FAIL: |panic: |[\w.-]+\.go:\d+: )`)

// failures are the failure lines of a test's output, each cut short.
func failures(out string) string {
	const maxLine = 500
	var b strings.Builder
	for line := range strings.Lines(out) {
		if !failureLine.MatchString(line) {
			continue
		}
		line = strings.TrimRight(line, "\n")
		if len(line) > maxLine {
			line = line[:maxLine] + "..."
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// childTestArgs selects just this test, keeping the parent's other
// -test.* flags (count, timeout, ...).
func childTestArgs(t *testing.T) []string {
	var out []string
	args := os.Args[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-test.run" || a == "--test.run":
			i++ // its value is the next argument (a test binary run by hand)
		case strings.HasPrefix(a, "-test.run") || strings.HasPrefix(a, "-test.v"):
			// replaced below
		default:
			out = append(out, a)
		}
	}
	return append(out, "-test.run=^"+t.Name()+"$", "-test.v")
}

// RequireAddrs skips the test or benchmark unless every address in addrs
// is configured on this host (as inside the namespace a script such as
// bench/failover/run.sh creates).
func RequireAddrs(t testing.TB, addrs ...string) {
	t.Helper()
	have := map[string]bool{}
	ifaces, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("listing addresses: %v", err)
	}
	for _, a := range ifaces {
		if ipn, ok := a.(*net.IPNet); ok {
			have[ipn.IP.String()] = true
		}
	}
	for _, a := range addrs {
		if !have[a] {
			t.Skipf("address %s is not configured here; run this inside a network namespace that has %v (see the package's run.sh)", a, addrs)
		}
	}
}

func skipOrFail(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
