package apiserver

import (
	"context"
	"crypto/tls"
	"maps"
	"sync"
	"time"

	"k8s.io/kubernetes/pkg/cluster/ports"
	"k8s.io/kubernetes/pkg/probe"
	"k8s.io/kubernetes/pkg/registry/core/componentstatus"
	kubeschedulerconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// etcdProbeTimeout bounds the etcd check of componentstatuses, as
// upstream's (its prober allows 20 s; the readiness check 2 s).
const etcdProbeTimeout = 2 * time.Second

// componentStatuses are the servers the deprecated componentstatuses
// resource reports on. By default they are kube-apiserver's: the
// controller manager and the scheduler on their default secure ports on
// this host, probed at /healthz, and etcd (kubeboot's through the
// server's one client, embedded or not). A component that runs in the
// process reports itself instead (Server.SetComponentStatus): it has no
// port unless --secure-port is set.
type componentStatuses struct {
	mu      sync.Mutex
	servers map[string]componentstatus.Server
}

func newComponentStatuses(etcd func(context.Context, time.Duration) error) *componentStatuses {
	// Upstream's probes: the components' serving certificates are
	// self-signed by default.
	insecure := &tls.Config{InsecureSkipVerify: true} //nolint:gosec
	return &componentStatuses{servers: map[string]componentstatus.Server{
		"controller-manager": &componentstatus.HttpServer{EnableHTTPS: true, TLSConfig: insecure, Addr: "127.0.0.1", Port: ports.KubeControllerManagerPort, Path: "/healthz"},
		"scheduler":          &componentstatus.HttpServer{EnableHTTPS: true, TLSConfig: insecure, Addr: "127.0.0.1", Port: kubeschedulerconfig.DefaultKubeSchedulerPort, Path: "/healthz"},
		"etcd-0":             etcdStatus(etcd),
	}}
}

// set replaces the server reported as name.
func (c *componentStatuses) set(name string, s componentstatus.Server) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.servers[name] = s
}

// list is the registry's view: a copy, as the registry probes the
// servers concurrently.
func (c *componentStatuses) list() map[string]componentstatus.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.servers)
}

// etcdStatus reports etcd as upstream's EtcdServer does, through check.
type etcdStatus func(context.Context, time.Duration) error

// DoServerCheck implements componentstatus.Server.
func (check etcdStatus) DoServerCheck() (probe.Result, string, error) {
	if err := check(context.Background(), etcdProbeTimeout); err != nil {
		return probe.Failure, "", err
	}
	return probe.Success, "ok", nil
}

// ComponentStatus is how a component running in the process reports its
// health to componentstatuses: nil while it runs, the reason once it
// does not.
type ComponentStatus func() error

// DoServerCheck implements componentstatus.Server.
func (status ComponentStatus) DoServerCheck() (probe.Result, string, error) {
	if err := status(); err != nil {
		return probe.Failure, "", err
	}
	return probe.Success, "ok", nil
}

// SetComponentStatus makes componentstatuses report the component name
// ("controller-manager", "scheduler") through status instead of probing
// its default port.
func (s *Server) SetComponentStatus(name string, status ComponentStatus) {
	s.coreProvider.components.set(name, status)
}
