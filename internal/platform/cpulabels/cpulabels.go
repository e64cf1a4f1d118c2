// Package cpulabels names, in CPU profiles, the part of the process a
// goroutine works for. kubeboot runs kube-apiserver, etcd, the
// controller manager, the scheduler, simulated nodes and more in one
// process, and a profile of it is one pile of samples without them:
// `go tool pprof -tags` (or -tagfocus=component=kube-scheduler) splits it.
//
// Goroutines inherit their creator's labels, so a component is labelled
// by starting it under Do; the API server's goroutines that serve an
// in-process request are labelled the server's by Serving, with the
// component that asked as the client.
package cpulabels

import (
	"context"
	"runtime/pprof"
)

const (
	// Component is the label naming the part of the process a goroutine
	// works for: kube-apiserver, etcd, or a controlplane.Component's name.
	Component = "component"
	// Client is the label naming, on the API server's goroutines serving
	// an in-process request, the component that made it.
	Client = "client"
	// APIServer is the API server's component name.
	APIServer = "kube-apiserver"
)

// Do runs f, and the goroutines it starts, labelled as component name;
// f's context carries the label.
func Do(ctx context.Context, name string, f func(context.Context)) {
	pprof.Do(ctx, pprof.Labels(Component, name), f)
}

// Of returns the component ctx is labelled as ("" if none).
func Of(ctx context.Context) string {
	name, _ := pprof.Label(ctx, Component)
	return name
}

// With returns ctx labelled as component name: for work that reaches
// another goroutine without ctx's labels (a connection's, dialled by
// one component, served by a server's goroutine).
func With(ctx context.Context, name string) context.Context {
	return pprof.WithLabels(ctx, pprof.Labels(Component, name))
}

// Serving labels the calling goroutine, which serves a request of ctx's
// for server, as server's, with the requesting component (ctx's label)
// as its client.
func Serving(ctx context.Context, server string) {
	labels := pprof.Labels(Component, server)
	if client := Of(ctx); client != "" {
		labels = pprof.Labels(Component, server, Client, client)
	}
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), labels))
}
