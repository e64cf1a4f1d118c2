// Package controlplane starts a kubeboot API server from Go: the same
// server `kubeboot apiserver` runs, with embedded etcd by default or an
// external etcd cluster.
//
// Use it as Config -> Complete -> New -> Run:
//
//	cfg := controlplane.Config{DataDir: dir, SecurePort: 0}
//	completed, err := cfg.Complete()
//	srv, err := controlplane.New(ctx, completed)
//	go srv.Run(ctx)
//	<-srv.Ready()
//
// Tests should prefer package kubeboottest, which does all of this and
// cleans up.
package controlplane
