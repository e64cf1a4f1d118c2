//go:build linux

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kubeboot/kubeboot/bench/internal/benchserver"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// The peer is what kubeboot replaces: kube-apiserver 1.37.2 and etcd 3.7.3,
// two processes, and with -server kube-controller-manager and
// kube-scheduler 1.37.2 too, all built from this module's graph.

// buildPeer builds what the peer runs into dir and sets the binaries the
// flags did not name.
func (b *bench) buildPeer(ctx context.Context, dir string) error {
	type build struct {
		out *string
		pkg string
	}
	builds := []build{
		{&b.peerBin, "k8s.io/kubernetes/cmd/kube-apiserver"},
		{&b.etcdBin, "go.etcd.io/etcd/server/v3"},
	}
	if b.server {
		builds = append(builds, build{&b.controllerManagerBin, "k8s.io/kubernetes/cmd/kube-controller-manager"},
			build{&b.schedulerBin, "k8s.io/kubernetes/cmd/kube-scheduler"})
	}
	for _, x := range builds {
		if *x.out != "" {
			continue
		}
		*x.out = filepath.Join(dir, filepath.Base(x.pkg))
		fmt.Fprintf(os.Stderr, "building %s ...\n", x.pkg)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", *x.out, x.pkg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build %s: %w", x.pkg, err)
		}
	}
	return nil
}

// peer is one running kube-apiserver and its etcd, and with -server its
// controller manager and scheduler.
type peer struct {
	apiserver, etcd *server
	components      []*server
}

// startPeerReady starts etcd and kube-apiserver on dir (files are created
// on the first start) and stores in *took the time from etcd's exec to the
// first 200 from /readyz, which kube-apiserver answers anonymously once
// its RBAC policy is stored. On error both are already stopped.
func (b *bench) startPeerReady(ctx context.Context, dir string, took *time.Duration) (*peer, error) {
	saKey, err := pki.EnsureSigningKey(dir, pki.ServiceAccountKeyName)
	if err != nil {
		return nil, err
	}
	tokenFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(peerTokenFile), 0o600); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	etcdSrv, err := start(b.etcdBin,
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", "http://127.0.0.1:"+strconv.Itoa(ports[1]),
		"--initial-advertise-peer-urls", "http://127.0.0.1:"+strconv.Itoa(ports[1]),
		"--initial-cluster", "default=http://127.0.0.1:"+strconv.Itoa(ports[1]),
		"--log-level", "error")
	if err != nil {
		return nil, err
	}
	apiSrv, err := start(b.peerBin,
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(ports[2]),
		"--cert-dir", filepath.Join(dir, "certs"),
		"--authorization-mode", "Node,RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", saKey, "--service-account-signing-key-file", saKey,
		"--token-auth-file", tokenFile,
		// Its endpoints would be a loopback address, which Endpoints refuse.
		"--endpoint-reconciler-type", "none")
	if err != nil {
		_ = etcdSrv.stop()
		return nil, err
	}
	p := &peer{apiserver: apiSrv, etcd: etcdSrv}
	url := "https://127.0.0.1:" + strconv.Itoa(ports[2])
	if b.server {
		cm, sched, err := b.startPeerComponents(dir, url, saKey)
		if err != nil {
			p.stop()
			return nil, err
		}
		p.components = []*server{cm, sched}
		apiSrv.ready = componentsReady(peerAdmin(url), etcdSrv.started)
	}
	// The processes are the control plane: time from the first exec.
	apiSrv.started = etcdSrv.started
	apiSrv.log.announce(url)
	if *took, err = b.waitReady(ctx, apiSrv); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// memory is the resident memory of all its processes.
func (p *peer) memory() (benchserver.Memory, error) {
	var pids []int
	for _, s := range append([]*server{p.apiserver, p.etcd}, p.components...) {
		pids = append(pids, s.cmd.Process.Pid)
	}
	return benchserver.ReadMemory(pids...)
}

// stop stops the controller manager and scheduler, kube-apiserver, then
// etcd. Unlike kubeboot's, their exit codes are not held against them:
// the figures are what is compared.
func (p *peer) stop() {
	for _, c := range p.components {
		_ = c.stop()
	}
	_ = p.apiserver.stop()
	_ = p.etcd.stop()
}

func (p *peer) exited() <-chan struct{} {
	c := make(chan struct{})
	go func() {
		select {
		case <-p.apiserver.done:
		case <-p.etcd.done:
		}
		close(c)
	}()
	return c
}

// freePorts returns n distinct TCP ports of 127.0.0.1 free right now.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// oncePeer is once for the peer: a fresh start, idle RSS, a restart.
func (b *bench) oncePeer(ctx context.Context) (sample, error) {
	var s sample
	dir, err := os.MkdirTemp(b.tmpDir, "kubeboot-bench-peer-")
	if err != nil {
		return s, err
	}
	defer os.RemoveAll(dir)
	p, err := b.startPeerReady(ctx, dir, &s.fresh)
	if err != nil {
		return s, fmt.Errorf("peer fresh start: %w", err)
	}
	select {
	case <-time.After(b.settle):
	case <-p.exited():
		p.stop()
		return s, p.apiserver.failure("peer exited while idle", nil)
	case <-ctx.Done():
		p.stop()
		return s, ctx.Err()
	}
	s.mem, err = p.memory()
	p.stop()
	b.transport.CloseIdleConnections()
	if err != nil {
		return s, err
	}
	p, err = b.startPeerReady(ctx, dir, &s.restart)
	if err != nil {
		return s, fmt.Errorf("peer restart: %w", err)
	}
	p.stop()
	b.transport.CloseIdleConnections()
	return s, nil
}
