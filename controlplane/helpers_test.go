package controlplane_test

import (
	"net"
	"testing"

	"github.com/kubeboot/kubeboot/controlplane"
)

// testConfig is a server on a free loopback port and a data dir of its own.
func testConfig(t *testing.T) controlplane.CompletedConfig {
	t.Helper()
	server := controlplane.NewServerRunOptions()
	server.AdvertiseAddress = net.IPv4(192, 0, 2, 1)
	cfg, err := controlplane.Config{
		DataDir: t.TempDir(), BindAddress: net.IPv4(127, 0, 0, 1), UseFreePort: true,
		Server: server, ServiceClusterIPRange: "10.0.0.0/24",
	}.Complete()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
