package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// machineEnv marks a process that is the second machine of a test
// (StartMachine).
const machineEnv = "KUBEBOOT_MACHINE"

// machine is a second machine of a test: the test run again in a
// network and mount namespace of its own, joined to the test's by a veth
// pair.
type machine struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   LockedBuffer
	done  chan struct{}
}

// InMachine reports whether this process is a test's second machine
// (StartMachine), and returns its env.
func InMachine() (map[string]string, bool) {
	if os.Getenv(machineEnv) == "" {
		return nil, false
	}
	env := map[string]string{}
	for _, kv := range strings.Split(os.Getenv(machineEnv), ",") {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env, true
}

// WaitStop blocks, in a second machine, until the test that started it
// stops it.
func WaitStop() { _, _ = io.Copy(io.Discard, os.Stdin) }

// StartMachine runs the calling test again as a second machine, in a new
// network and mount namespace, where InMachine reports true and env:
// the test's branch for it sets the machine up, then waits for WaitStop.
// The two are joined by a veth pair: this namespace's end, dev, gets
// addr/24 and the machine's, eth0, peer/24; each may be an IPv4 and an
// IPv6 address, comma-separated as --node-ip takes them (IPv6 on a /64).
// Call it inside the test's own
// namespace (InNetNS). The machine stops when the test ends; its output
// is logged if the test failed.
func StartMachine(t *testing.T, dev, addr, peer string, env map[string]string) {
	t.Helper()
	startMachine(t, dev, peer, env, ifaceAddrs(dev, addr)...)
}

// ifaceAddrs are the commands that give dev addrs, one address or an
// IPv4 and an IPv6 one, comma-separated: a /24 for IPv4, a /64 for IPv6,
// without duplicate address detection, so that it is usable at once.
func ifaceAddrs(dev, addrs string) [][]string {
	var cmds [][]string
	for _, a := range strings.Split(addrs, ",") {
		c := []string{"ip", "addr", "add", a + "/24", "dev", dev}
		if strings.Contains(a, ":") {
			c = []string{"ip", "addr", "add", a + "/64", "dev", dev, "nodad"}
		}
		cmds = append(cmds, c)
	}
	return cmds
}

// Bridge makes a bridge, name, with addr/24 in this namespace (an IPv4
// and an IPv6 address, comma-separated, as StartMachine takes them), for
// StartMachineOn: the machines on it reach each other and this namespace
// as if on one switch.
func Bridge(t *testing.T, name, addr string) {
	t.Helper()
	cmds := append([][]string{{"ip", "link", "add", name, "type", "bridge"}}, ifaceAddrs(name, addr)...)
	for _, c := range append(cmds, []string{"ip", "link", "set", name, "up"}) {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(c, " "), err, out)
		}
	}
}

// StartMachineOn is StartMachine for a machine on bridge (Bridge): the
// veth pair's end here, dev, is a port of the bridge.
func StartMachineOn(t *testing.T, bridge, dev, peer string, env map[string]string) {
	t.Helper()
	startMachine(t, dev, peer, env, []string{"ip", "link", "set", dev, "master", bridge})
}

// startMachine starts the machine, its veth pair's end here, dev, set up
// by attach.
func startMachine(t *testing.T, dev, peer string, env map[string]string, attach ...[]string) {
	t.Helper()
	var kvs []string
	for k, v := range env {
		kvs = append(kvs, k+"="+v)
	}
	script := []string{"set -e", "ip link set lo up", privateDevicePlugins,
		"while ! ip link show eth0 >/dev/null 2>&1; do sleep 0.05; done"}
	for _, c := range ifaceAddrs("eth0", peer) {
		script = append(script, strings.Join(c, " "))
	}
	script = append(script, "ip link set eth0 up", `exec "$@"`)
	args := append([]string{"--net", "--mount", "--", "sh", "-c", strings.Join(script, "\n"), "sh", os.Args[0]}, childTestArgs(t)...)
	m := &machine{cmd: exec.Command("unshare", args...), done: make(chan struct{})}
	m.cmd.Env = append(os.Environ(), machineEnv+"="+strings.Join(kvs, ","))
	m.cmd.Stdout, m.cmd.Stderr = &m.out, &m.out
	// As InNetNS's: the machine goes with the test.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	var err error
	if m.stdin, err = m.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("starting the second machine: %v", err)
	}
	go func() { _ = m.cmd.Wait(); close(m.done) }()
	t.Cleanup(func() {
		m.stdin.Close()
		select {
		case <-m.done:
		case <-time.After(30 * time.Second):
			_ = m.cmd.Process.Kill()
			<-m.done
		}
		if t.Failed() {
			t.Logf("output of the second machine:\n%s", m.out.String())
		}
	})
	// The veth's far end goes into the machine's namespace once unshare
	// has made it (the process keeps its PID through the execs).
	own, _ := os.Readlink("/proc/self/ns/net")
	pid := m.cmd.Process.Pid
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
		return err == nil && ns != own, nil
	}); err != nil {
		t.Fatalf("the second machine has no network namespace of its own: %v\n%s", err, m.out.String())
	}
	cmds := append([][]string{{"ip", "link", "add", dev, "type", "veth", "peer", "name", "eth0", "netns", fmt.Sprint(pid)}}, attach...)
	for _, c := range append(cmds, []string{"ip", "link", "set", dev, "up"}) {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(c, " "), err, out)
		}
	}
}

// AgentMachine is how a second machine (StartMachine) joins the first's
// `kubeboot server`: RunAgentMachine's settings.
type AgentMachine struct {
	// Server is the server's address, host:port.
	Server string
	// TokenFile is where the first machine writes the join token
	// (HandOverToken).
	TokenFile string
	// NodeName and NodeIP are the agent's node.
	NodeName, NodeIP string
	// Args are more flags of `kubeboot agent`.
	Args []string
	// Routes are ranges routed out of eth0 before the agent starts
	// (RouteOut): the Services' ranges.
	Routes []string
}

// RunAgentMachine runs, on a second machine, `kubeboot agent` on
// kubeboot's embedded containerd (EmbeddedContainerd), joined with the
// token the first machine hands over, until the test stops the machine
// (WaitStop); it fails the test if the agent exits before.
func RunAgentMachine(t *testing.T, a AgentMachine) {
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	RouteOut(t, "eth0", a.Routes)
	agentDir := filepath.Join(t.TempDir(), "agent")
	runtime := EmbeddedContainerd(t, agentDir)
	var token []byte
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		token, err = os.ReadFile(a.TokenFile)
		return err == nil, nil
	}); err != nil {
		t.Fatalf("no token from the server's machine: %v", err)
	}
	args := append([]string{"--server", "https://" + a.Server, "--token", strings.TrimSpace(string(token)),
		"--node-name", a.NodeName, "--node-ip", a.NodeIP}, NodeArgs(t, "")...)
	agent := StartAgent(t, bin, agentDir, append(append(args, runtime...), a.Args...)...)
	stopped := make(chan struct{})
	go func() { WaitStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-agent.Exited():
		t.Errorf("the agent exited: %v\n%s", agent.ExitErr(), agent.Logs())
	}
}

// HandOverToken writes the join token of the server whose data dir is
// dataDir to path, whole (written, then renamed), for RunAgentMachine.
func HandOverToken(t testing.TB, dataDir, path string) {
	t.Helper()
	token, err := os.ReadFile(filepath.Join(dataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".tmp", token, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}
