package etcdstore

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage/storagebackend"
)

// CustomResources returns the storage of custom resources: JSON
// (unstructured) objects at "<prefix>/<group>/<resource>", as
// kube-apiserver stores them, behind the watch cache when enabled. The
// apiextensions server adds conversion and schema coercion on top.
func (b *Backend) CustomResources() generic.RESTOptionsGetter {
	return customResourceOptions{b}
}

type customResourceOptions struct{ b *Backend }

func (c customResourceOptions) GetRESTOptions(gr schema.GroupResource, _ runtime.Object) (generic.RESTOptions, error) {
	sc := storagebackend.NewDefaultConfig(c.b.cfg.Prefix, unstructured.UnstructuredJSONScheme)
	sc.CompactionInterval = c.b.cfg.CompactionInterval
	sc.CountMetricPollPeriod = c.b.cfg.CountMetricPollPeriod
	sc.StorageObjectCountTracker = c.b.cfg.ObjectCountTracker
	return generic.RESTOptions{
		StorageConfig:             sc.ForResource(gr),
		Decorator:                 c.b.decorator(c.b.cfg.EnableWatchCache),
		DeleteCollectionWorkers:   1,
		ResourcePrefix:            "/" + gr.Group + "/" + gr.Resource,
		CountMetricPollPeriod:     c.b.cfg.CountMetricPollPeriod,
		StorageObjectCountTracker: c.b.cfg.ObjectCountTracker,
	}, nil
}
