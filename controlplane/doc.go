// Package controlplane starts a kubeboot control plane from Go: the API
// server `kubeboot apiserver` runs, with embedded etcd by default or an
// external etcd cluster, and the components given to it
// (Config.Components) beside it, as `kubeboot server` runs them.
//
// Use it as NewConfig -> change what differs -> Complete -> New -> Run:
//
//	cfg := controlplane.NewConfig()
//	cfg.DataDir = dir
//	cfg.SecureServing.BindPort = 0 // a free port
//	completed, err := cfg.Complete()
//	srv, err := controlplane.New(ctx, completed)
//	go srv.Run(ctx)
//	<-srv.Ready()
//
// Tests should prefer package kubeboottest, which does all of this and
// cleans up.
package controlplane
