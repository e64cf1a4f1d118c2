// Command simulator runs kubeboot's simulated nodes (kwok's controllers,
// the code `kubeboot server --simulated-nodes` runs in-process) against
// any apiserver: the peer side of bench/nodes, so that both control
// planes are driven by the same kwok code with the same stages. It grants
// itself the same rights and FlowSchema as kubeboot's in-process nodes,
// through the admin kubeconfig, then acts as their user (impersonation).
// It prints "ready" once every node is Ready and runs until SIGTERM.
//
//	simulator -server https://127.0.0.1:6443 -token ADMIN-TOKEN -nodes 100
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeboot/kubeboot/internal/components/simulatednodes"
)

func main() {
	server := flag.String("server", "", "the apiserver's URL (its certificate is not verified)")
	token := flag.String("token", "", "an admin's bearer token")
	opts := simulatednodes.NewOptions()
	flag.IntVar(&opts.Count, "nodes", 100, "simulated nodes")
	flag.Parse()
	if err := run(&rest.Config{Host: *server, BearerToken: *token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, opts); err != nil {
		fmt.Fprintln(os.Stderr, "simulator:", err)
		os.Exit(1)
	}
}

func run(admin *rest.Config, opts *simulatednodes.Options) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// Unlimited, as the in-process clients of kubeboot's nodes are.
	admin.QPS = -1
	client, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	if err := simulatednodes.Access(ctx, client); err != nil {
		return err
	}
	as := *admin
	as.Impersonate.UserName = simulatednodes.User
	return simulatednodes.Run(ctx, opts, &as, nil, nil, nil, func() { fmt.Println("ready") })
}
