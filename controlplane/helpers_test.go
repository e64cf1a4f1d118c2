package controlplane_test

import (
	"net"
	"testing"

	"github.com/kubeboot/kubeboot/controlplane"
)

// testConfig is a server on a free loopback port and a data dir of its own.
func testConfig(t *testing.T) controlplane.CompletedConfig {
	t.Helper()
	return testConfigIn(t, t.TempDir(), nil)
}

// testConfigIn is a server on a free loopback port and dataDir, changed
// by edit if not nil.
func testConfigIn(t *testing.T, dataDir string, edit func(*controlplane.Config)) controlplane.CompletedConfig {
	t.Helper()
	c := controlplane.NewConfig()
	c.DataDir = dataDir
	c.SecureServing.BindAddress, c.SecureServing.BindPort = net.IPv4(127, 0, 0, 1), 0
	c.GenericServerRun.AdvertiseAddress = net.IPv4(192, 0, 2, 1)
	c.ServiceClusterIPRange = "10.0.0.0/24"
	if edit != nil {
		edit(&c)
	}
	cfg, err := c.Complete()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
