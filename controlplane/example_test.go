package controlplane_test

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/kubeboot/kubeboot/controlplane"
)

// A control plane on a free loopback port, with its data in a directory of
// its own, stopped again once ready.
func Example() {
	dir, err := os.MkdirTemp("", "controlplane-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	cfg := controlplane.NewConfig()
	cfg.DataDir = dir
	cfg.SecureServing.BindAddress = net.IPv4(127, 0, 0, 1)
	cfg.SecureServing.BindPort = 0 // a free port: srv.URL() names it
	cfg.GenericServerRun.AdvertiseAddress = net.IPv4(192, 0, 2, 1)
	cfg.ServiceClusterIPRange = "10.96.0.0/16"
	completed, err := cfg.Complete()
	if err != nil {
		panic(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	srv, err := controlplane.New(ctx, completed)
	if err != nil {
		panic(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	<-srv.Ready()
	fmt.Println("ready; admin kubeconfig in the data dir:", srv.AdminKubeconfig() == dir+"/admin.kubeconfig")
	stop()
	fmt.Println("stopped:", <-done)
	// Output:
	// ready; admin kubeconfig in the data dir: true
	// stopped: <nil>
}
