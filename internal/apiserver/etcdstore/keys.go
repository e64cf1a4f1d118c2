package etcdstore

import "k8s.io/apimachinery/pkg/runtime/schema"

// DefaultPrefix is the etcd key prefix of every object, as kube-apiserver's
// --etcd-prefix default.
const DefaultPrefix = "/registry"

// resourcePrefixes holds the keys kube-apiserver lays out differently from
// "<prefix>/<resource>". events.k8s.io Events share the core Events' keys.
var resourcePrefixes = map[schema.GroupResource]string{
	{Group: "", Resource: "services"}:               "/services/specs",
	{Group: "", Resource: "endpoints"}:              "/services/endpoints",
	{Group: "events.k8s.io", Resource: "events"}:    "/events",
	{Group: "", Resource: "replicationcontrollers"}: "/controllers",
	{Group: "", Resource: "nodes"}:                  "/minions",
}

// storageVersions lists resources stored in another group's version than
// their own: events.k8s.io Events are kept as core/v1 Events.
var storageVersions = map[schema.GroupResource]schema.GroupVersion{
	{Group: "events.k8s.io", Resource: "events"}: {Version: "v1"},
}

// uncachedResources are served straight from etcd, as kube-apiserver's
// default watch cache sizes do for events (high churn, rarely watched).
var uncachedResources = map[schema.GroupResource]bool{
	{Group: "", Resource: "events"}:              true,
	{Group: "events.k8s.io", Resource: "events"}: true,
}

// ResourcePrefix returns the key prefix, below the etcd prefix, under which
// a resource's objects are stored.
func ResourcePrefix(gr schema.GroupResource) string {
	if p, ok := resourcePrefixes[gr]; ok {
		return p
	}
	return "/" + gr.Resource
}
