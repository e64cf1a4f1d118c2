package containerruntime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/internal/components/containerruntime/embedded"
	"github.com/kubeboot/kubeboot/internal/platform/registries"
)

// The embedded containerd's files, in the node's directory.
const (
	// dirName holds its configuration, root, state, socket and log.
	dirName = "containerd"
	// binDirName holds the runc shim (installShim), first on
	// containerd's PATH.
	binDirName = "bin"
	// ImagesDirName holds the air-gap image tarballs imported before
	// the kubelet starts.
	ImagesDirName = "images"
)

// command is kubeboot's command that runs containerd.
const command = "containerd"

// Timeouts of the embedded containerd.
var (
	// startTimeout bounds how long containerd may take to serve.
	startTimeout = time.Minute
	// stopTimeout bounds how long it may take to exit after SIGTERM.
	stopTimeout = 10 * time.Second
	// restartBackoff is the first wait before a restart, doubled up to
	// maxRestartBackoff while containerd keeps dying.
	restartBackoff    = time.Second
	maxRestartBackoff = 30 * time.Second
)

// Socket is the embedded containerd's socket for the node in dir.
func Socket(dir string) string { return filepath.Join(dir, dirName, "containerd.sock") }

// Runtime is a node's running container runtime.
type Runtime struct {
	// Endpoint is its CRI endpoint, the kubelet's
	// --container-runtime-endpoint.
	Endpoint string
	// done is closed once the embedded containerd has stopped.
	done chan struct{}
}

// Wait blocks until the runtime has stopped (after the context Start was
// given ends).
func (r *Runtime) Wait() {
	if r.done != nil {
		<-r.done
	}
}

// Node is what the embedded runtime is told of the node it runs for.
type Node struct {
	// Dir is the node's directory.
	Dir string
	// CNI says the node's pod network is kubeboot's, whose CNI plugins
	// the host must have; CNIConfDir is where the node writes its CNI
	// configuration (--flannel-cni-conf's directory), which the runtime
	// reads.
	CNI        bool
	CNIConfDir string
	// Mirror, if set, is the node's embedded registry mirror.
	Mirror *registries.LocalMirror
}

// Start returns the node's runtime: the host's at --container-runtime-
// endpoint, or the embedded containerd, started for the node n and
// serving, with the air-gap images in its directory imported. It stops
// when ctx is done.
func (o *Options) Start(ctx context.Context, n Node) (*Runtime, error) {
	if !o.Embedded() {
		return &Runtime{Endpoint: o.Endpoint}, nil
	}
	cfg, err := o.config(n)
	if err != nil {
		return nil, err
	}
	if err := claimSocket(cfg.socket); err != nil {
		return nil, err
	}
	if err := cfg.write(); err != nil {
		return nil, err
	}
	r := &Runtime{Endpoint: "unix://" + cfg.socket, done: make(chan struct{})}
	first, exited, err := cfg.start(ctx)
	if err != nil {
		return nil, err
	}
	if err := cfg.waitServing(ctx, exited); err != nil {
		stopCommand(first, exited)
		return nil, err
	}
	klog.FromContext(ctx).Info("Started containerd", "pid", first.Process.Pid, "socket", cfg.socket, "log", cfg.log)
	if err := importImages(ctx, cfg.socket, filepath.Join(n.Dir, ImagesDirName), cfg.stateFile, o.Snapshotter, o.PauseImage); err != nil {
		stopCommand(first, exited)
		return nil, err
	}
	go func() {
		defer close(r.done)
		cfg.supervise(ctx, first, exited)
	}()
	return r, nil
}

// setup is the embedded containerd of one node: where its files are.
type setup struct {
	dir, configFile, socket, log, binDir, stateFile, registryDir string
	config                                                       []byte
	// hosts are the hosts.toml of each registry, by its directory.
	hosts map[string][]byte
}

// config checks the host and returns the embedded containerd's setup
// for the node n: runc must be installed and, with n.CNI, the CNI
// plugins. It writes nothing.
func (o *Options) config(n Node) (*setup, error) {
	if err := CheckHost(n.CNI); err != nil {
		return nil, err
	}
	binDirs, err := cniBinDirs(n.CNI)
	if err != nil {
		return nil, err
	}
	s := &setup{dir: filepath.Join(n.Dir, dirName), binDir: filepath.Join(n.Dir, binDirName)}
	s.configFile = filepath.Join(s.dir, "config.toml")
	s.socket = Socket(n.Dir)
	s.log = filepath.Join(s.dir, "containerd.log")
	s.stateFile = filepath.Join(s.dir, importedFileName)
	s.registryDir = filepath.Join(s.dir, "certs.d")
	r := o.registries
	if r == nil {
		r = &registries.Config{}
	}
	if s.hosts, err = r.HostsFiles(n.Mirror); err != nil {
		return nil, err
	}
	s.config, err = renderConfig(configValues{
		Root: filepath.Join(s.dir, "root"), State: filepath.Join(s.dir, "state"), Socket: s.socket,
		Snapshotter: o.Snapshotter, PauseImage: o.PauseImage, CNIBinDirs: binDirs,
		CNIConfDir:          n.CNIConfDir,
		RegistryConfigDir:   s.registryDir,
		RegistryAuths:       r.Auths(),
		RestrictOOMScoreAdj: !hasCapability(capSysResource),
	})
	return s, err
}

// write writes the configuration and the shim's link.
func (s *setup) write() error {
	for _, d := range []string{s.dir, s.binDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := os.WriteFile(s.configFile, s.config, 0o600); err != nil {
		return fmt.Errorf("containerd's configuration: %w", err)
	}
	// The registries' files as registries.yaml says now, none older.
	if err := os.RemoveAll(s.registryDir); err != nil {
		return err
	}
	for dir, data := range s.hosts {
		if err := os.MkdirAll(filepath.Join(s.registryDir, dir), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(s.registryDir, dir, "hosts.toml"), data, 0o600); err != nil {
			return fmt.Errorf("registry %s's hosts.toml: %w", dir, err)
		}
	}
	return installShim(s.binDir, embedded.LeanShim)
}

// installShim puts the runc shim that containerd runs in binDir, first on
// its PATH: the lean shim lean opens (embedded.LeanShim), rewritten only
// when it differs from the one there (a running shim keeps its old file),
// or, when there is none, a link to this binary.
func installShim(binDir string, lean func() (fs.File, bool, error)) error {
	path := filepath.Join(binDir, embedded.ShimName)
	if same, err := sameFile(path, lean); err != nil || same {
		return err
	}
	shim, ok, err := lean()
	if err != nil {
		return fmt.Errorf("the embedded runc shim: %w", err)
	}
	if !ok {
		return linkSelf(path)
	}
	defer shim.Close()
	tmp, err := os.CreateTemp(binDir, "."+embedded.ShimName+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, shim)
	if err == nil {
		err = tmp.Chmod(0o755)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("writing the runc shim: %w", err)
	}
	return nil
}

// sameFile reports whether path is a file holding exactly what open
// opens; false if open finds nothing.
func sameFile(path string, open func() (fs.File, bool, error)) (bool, error) {
	shim, ok, err := open()
	if err != nil || !ok {
		return false, err
	}
	defer shim.Close()
	want, err := shim.Stat()
	if err != nil {
		return false, err
	}
	f, err := os.Open(path)
	if err != nil {
		return false, nil
	}
	defer f.Close()
	if have, err := f.Stat(); err != nil || !have.Mode().IsRegular() || have.Size() != want.Size() {
		return false, nil
	}
	a, b := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		n, errA := io.ReadFull(shim, a)
		m, errB := io.ReadFull(f, b)
		if !bytes.Equal(a[:n], b[:m]) {
			return false, nil
		}
		if errA != nil || errB != nil {
			// Equal sizes: both end at the same read, with the same error.
			return errA == errB && (errA == io.EOF || errA == io.ErrUnexpectedEOF), nil
		}
	}
}

// linkSelf makes path a link to this binary, which runs as the runc shim
// when invoked by that name (embedded.IsShim).
func linkSelf(path string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if target, err := os.Readlink(path); err == nil && target == exe {
		return nil
	}
	klog.V(2).InfoS("The runc shim is this binary: it embeds no lean shim (hack/release.sh builds one in)", "path", path)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Symlink(exe, path); err != nil {
		return fmt.Errorf("the runc shim's link: %w", err)
	}
	return nil
}

// start starts `kubeboot containerd` with the node's configuration, its
// shim link first on its PATH, its output in its log file. exited gets
// its end.
func (s *setup) start(ctx context.Context) (*exec.Cmd, chan error, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	logFile, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("containerd's log: %w", err)
	}
	defer logFile.Close()
	cmd := exec.CommandContext(ctx, exe, command, "--config", s.configFile)
	cmd.Env = append(os.Environ(), "PATH="+s.binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = stopTimeout
	cmd.SysProcAttr = dieWithParent()
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting containerd: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return cmd, exited, nil
}

// waitServing waits until containerd accepts connections on its socket.
func (s *setup) waitServing(ctx context.Context, exited chan error) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		select {
		case err := <-exited:
			exited <- err
			return false, fmt.Errorf("containerd exited (%v): %s", err, s.lastLogLine())
		default:
		}
		c, err := net.Dial("unix", s.socket)
		if err != nil {
			return false, nil
		}
		c.Close()
		return true, nil
	})
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("containerd did not serve %s within %v: %s", s.socket, startTimeout, s.lastLogLine())
	}
	return err
}

// supervise restarts containerd whenever it exits before ctx is done.
func (s *setup) supervise(ctx context.Context, cmd *exec.Cmd, exited chan error) {
	logger := klog.FromContext(ctx)
	backoff := restartBackoff
	pid := cmd.Process.Pid
	for {
		started := time.Now()
		err := <-exited
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > time.Minute {
			backoff = restartBackoff
		}
		logger.Error(err, "containerd exited; restarting it (running containers are kept)", "pid", pid, "in", backoff, "log", s.log)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxRestartBackoff)
		cmd, next, err := s.start(ctx)
		if err != nil {
			// Tried again after the next back-off.
			exited = make(chan error, 1)
			exited <- err
			continue
		}
		exited, pid = next, cmd.Process.Pid
		logger.Info("Restarted containerd", "pid", pid)
	}
}

// stopCommand stops a containerd that did not come up.
func stopCommand(cmd *exec.Cmd, exited chan error) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(stopTimeout):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// lastLogLine is the last line containerd logged, its reason for dying.
func (s *setup) lastLogLine() string {
	data, err := os.ReadFile(s.log)
	if err != nil {
		return "no log"
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return fmt.Sprintf("%s (log: %s)", lines[len(lines)-1], s.log)
}

// CheckHost returns what the host lacks for the embedded containerd, or
// nil: runc and, with cni (kubeboot's pod network), the CNI plugins,
// each named with the package that brings it.
func CheckHost(cni bool) error {
	if _, err := exec.LookPath("runc"); err != nil {
		return errors.New("runc is not installed (not on PATH): install your distribution's runc package (Debian's and Ubuntu's: runc)")
	}
	_, err := cniBinDirs(cni)
	return err
}

// claimSocket refuses a socket another containerd serves and removes a
// stale one, left by a containerd that died, for this one's.
func claimSocket(path string) error {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return fmt.Errorf("another containerd serves %s: stop it, or give this node another --data-dir", path)
	}
	return os.Remove(path)
}

// capSysResource is CAP_SYS_RESOURCE's bit.
const capSysResource = 24

// hasCapability reports whether this process has capability bit in its
// effective set.
func hasCapability(bit uint) bool {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<bit) != 0
		}
	}
	return false
}

// cniPluginDirs are where distributions install the CNI plugins: upstream's
// default, Debian's containernetworking-plugins, Fedora's.
var cniPluginDirs = []string{"/opt/cni/bin", "/usr/lib/cni", "/usr/libexec/cni"}

// cniPlugins are the plugins kubeboot's pod network uses, and the
// runtime's loopback.
var cniPlugins = []string{"bridge", "host-local", "portmap", "loopback"}

// cniBinDirs returns the directories the runtime looks for CNI plugins
// in: those of cniPluginDirs that exist. With required, one must hold
// every plugin of kubeboot's pod network.
func cniBinDirs(required bool) ([]string, error) {
	var dirs []string
	complete := false
	for _, dir := range cniPluginDirs {
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		dirs = append(dirs, dir)
		missing := false
		for _, p := range cniPlugins {
			if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
				missing = true
			}
		}
		complete = complete || !missing
	}
	if required && !complete {
		return nil, fmt.Errorf("the CNI plugins %s are not all in any of %s: install your distribution's CNI plugins (Debian's and Ubuntu's: containernetworking-plugins) or upstream's in /opt/cni/bin",
			strings.Join(cniPlugins, ", "), strings.Join(cniPluginDirs, ", "))
	}
	if len(dirs) == 0 {
		dirs = cniPluginDirs[:1]
	}
	return dirs, nil
}
