package etcdstore

import (
	"context"
	"fmt"
	"path"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/registry/generic"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage"
	cacherstorage "k8s.io/apiserver/pkg/storage/cacher"
	"k8s.io/apiserver/pkg/storage/etcd3"
	etcdfeature "k8s.io/apiserver/pkg/storage/feature"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/apiserver/pkg/storage/value"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
	flowcontrolrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"
	"k8s.io/client-go/tools/cache"
)

// StorageMediaType is how objects are encoded in etcd, as kube-apiserver.
const StorageMediaType = runtime.ContentTypeProtobuf

// Config describes how resources reach etcd.
type Config struct {
	// Client is the etcd client every resource shares. Required. The caller
	// owns it and closes it after the storage is destroyed.
	Client *clientv3.Client
	// Prefix is the key prefix of every object. Default: DefaultPrefix.
	Prefix string
	// Serializer encodes objects for storage (the server's codec factory).
	Serializer runtime.StorageSerializer
	// EnableWatchCache serves lists and watches from memory, as
	// kube-apiserver's --watch-cache (default true there and here).
	EnableWatchCache bool
	// GarbageCollection switches on the registries' garbage collection
	// (kube-apiserver's --enable-garbage-collector): deletes honour
	// foreground and orphan propagation with finalizers a garbage
	// collector removes.
	GarbageCollection bool
	// DeleteCollectionWorkers is how many deletes a deletecollection runs
	// at once (--delete-collection-workers). Default: 1.
	DeleteCollectionWorkers int
	// CompactionInterval is how often old revisions are compacted away;
	// 0 disables compaction. kube-apiserver's default is 5 minutes.
	CompactionInterval time.Duration
	// CountMetricPollPeriod is how often object counts are refreshed for
	// metrics and request cost estimates; 0 disables it.
	CountMetricPollPeriod time.Duration
	// ObjectCountTracker receives those counts (may be nil).
	ObjectCountTracker flowcontrolrequest.StorageObjectCountTracker
	// Transformers, when set, encrypt and decrypt each resource's values
	// (kube-apiserver's --encryption-provider-config); unset, values are
	// stored as they are.
	Transformers value.ResourceTransformers
	// Resources, when set, gives each resource its storage version, codec
	// and key prefix: kube-apiserver's storage factory, so that the data
	// reads the same in either server. When nil, every resource is stored
	// as its group's v1 under ResourcePrefix, encoded by Serializer (the
	// apiextensions and aggregator servers' layout).
	Resources serverstorage.StorageFactory
}

// Backend implements generic.RESTOptionsGetter on one shared etcd client.
type Backend struct {
	cfg       Config
	kclient   *kubernetes.Client
	compactor etcd3.Compactor

	mu       sync.Mutex
	destroys []func()
	// caches are the watch caches built so far, shared with the
	// WithSerializer copies.
	caches *cacheSet
	// fieldSets are the managedFields' field sets the watch caches'
	// objects share, also shared with the copies.
	fieldSets *fieldSets
}

// cacheSet is a set of live watch caches.
type cacheSet struct {
	mu  sync.Mutex
	set map[*cacherstorage.Cacher]struct{}
}

func (c *cacheSet) add(cacher *cacherstorage.Cacher) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set[cacher] = struct{}{}
}

func (c *cacheSet) remove(cacher *cacherstorage.Cacher) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.set, cacher)
}

func (c *cacheSet) ready() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for cacher := range c.set {
		if !cacher.Ready() {
			return false
		}
	}
	return true
}

// WithSerializer returns a Backend on the same client and settings whose
// objects are encoded by serializer (another server's scheme in the
// chain). It runs no compactor of its own.
func (b *Backend) WithSerializer(serializer runtime.StorageSerializer) *Backend {
	cfg := b.cfg
	cfg.Serializer = serializer
	cfg.Resources = nil
	return &Backend{cfg: cfg, kclient: b.kclient, compactor: b.compactor, caches: b.caches, fieldSets: b.fieldSets}
}

// New returns a Backend. Call Destroy when the server stops.
func New(cfg Config) (*Backend, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("storage: an etcd client is required")
	}
	if cfg.Serializer == nil {
		return nil, fmt.Errorf("storage: a serializer is required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.DeleteCollectionWorkers == 0 {
		cfg.DeleteCollectionWorkers = 1
	}
	kc := &kubernetes.Client{Client: cfg.Client}
	kc.Kubernetes = kc
	if len(cfg.Client.Endpoints()) == 0 {
		// The watch cache serves consistent and streaming lists only once
		// it knows etcd answers progress requests, which the library learns
		// by asking each endpoint for its version; an in-process client
		// (embedded etcd) has no endpoint to ask.
		etcdfeature.DefaultFeatureSupportChecker.CheckClient(cfg.Client.Ctx(), inProcessEndpoint{cfg.Client}, storage.RequestWatchProgress)
	}
	b := &Backend{cfg: cfg, kclient: kc, caches: &cacheSet{set: map[*cacherstorage.Cacher]struct{}{}}, fieldSets: newFieldSets()}
	if cfg.CompactionInterval > 0 {
		c := etcd3.StartCompactorPerEndpoint(cfg.Client, cfg.CompactionInterval)
		b.compactor = c
		b.destroys = append(b.destroys, c.Stop)
	}
	return b, nil
}

// GetRESTOptions implements generic.RESTOptionsGetter.
func (b *Backend) GetRESTOptions(gr schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	config, prefix, err := b.resourceConfig(gr, example)
	if err != nil {
		return generic.RESTOptions{}, err
	}
	return generic.RESTOptions{
		StorageConfig:             config,
		Decorator:                 b.decorator(!uncachedResources[gr] && b.cfg.EnableWatchCache),
		EnableGarbageCollection:   b.cfg.GarbageCollection,
		DeleteCollectionWorkers:   b.cfg.DeleteCollectionWorkers,
		ResourcePrefix:            prefix,
		CountMetricPollPeriod:     b.cfg.CountMetricPollPeriod,
		StorageObjectCountTracker: b.cfg.ObjectCountTracker,
	}, nil
}

// resourceConfig is gr's storage configuration and key prefix.
func (b *Backend) resourceConfig(gr schema.GroupResource, example runtime.Object) (*storagebackend.ConfigForResource, string, error) {
	if b.cfg.Resources != nil {
		config, err := b.cfg.Resources.NewConfig(gr, example)
		if err != nil {
			return nil, "", fmt.Errorf("storage configuration for %s: %w", gr, err)
		}
		config.CompactionInterval = b.cfg.CompactionInterval
		config.CountMetricPollPeriod = b.cfg.CountMetricPollPeriod
		config.StorageObjectCountTracker = b.cfg.ObjectCountTracker
		return config, b.cfg.Resources.ResourcePrefix(gr), nil
	}
	storageVersion, ok := storageVersions[gr]
	if !ok {
		storageVersion = schema.GroupVersion{Group: gr.Group, Version: "v1"}
	}
	memoryVersion := schema.GroupVersion{Group: gr.Group, Version: runtime.APIVersionInternal}
	codec, versioner, err := serverstorage.NewStorageCodec(serverstorage.StorageCodecConfig{
		StorageMediaType:  StorageMediaType,
		StorageSerializer: b.cfg.Serializer,
		StorageVersion:    storageVersion,
		MemoryVersion:     memoryVersion,
	})
	if err != nil {
		return nil, "", fmt.Errorf("storage codec for %s: %w", gr, err)
	}
	sc := storagebackend.NewDefaultConfig(b.cfg.Prefix, codec)
	sc.EncodeVersioner = versioner
	sc.CompactionInterval = b.cfg.CompactionInterval
	sc.CountMetricPollPeriod = b.cfg.CountMetricPollPeriod
	sc.StorageObjectCountTracker = b.cfg.ObjectCountTracker
	return sc.ForResource(gr), ResourcePrefix(gr), nil
}

// UncachedDecorator builds a resource's storage on the shared client
// without a watch cache.
func (b *Backend) UncachedDecorator() generic.StorageDecorator { return b.decorator(false) }

// decorator builds a resource's storage.Interface on the shared client,
// optionally behind the watch cache.
func (b *Backend) decorator(cached bool) generic.StorageDecorator {
	return func(config *storagebackend.ConfigForResource, resourcePrefix string, keyFunc func(runtime.Object) (string, error),
		newFunc, newListFunc func() runtime.Object, getAttrs storage.AttrFunc, triggers storage.IndexerFuncs,
		indexers *cache.Indexers) (storage.Interface, factory.DestroyFunc, error) {
		versioner := storage.APIObjectVersioner{}
		raw, err := etcd3.New(b.kclient, b.compactor, config.Codec, newFunc, newListFunc, config.Prefix, resourcePrefix,
			config.GroupResource, b.transformer(config.GroupResource), config.LeaseManagerConfig,
			etcd3.NewDefaultDecoder(config.Codec, versioner), versioner)
		if err != nil {
			return nil, nil, fmt.Errorf("etcd storage for %s: %w", config.GroupResource, err)
		}
		checked := clientMistakes{raw}
		if !cached {
			var once sync.Once
			return checked, func() { once.Do(raw.Close) }, nil
		}
		cacher, err := cacherstorage.NewCacherFromConfig(cacherstorage.Config{
			Storage:             sharingFieldSets{checked, b.fieldSets},
			Versioner:           versioner,
			GroupResource:       config.GroupResource,
			EventsHistoryWindow: config.EventsHistoryWindow,
			ResourcePrefix:      resourcePrefix,
			KeyFunc:             keyFunc,
			NewFunc:             newFunc,
			NewListFunc:         newListFunc,
			GetAttrsFunc:        getAttrs,
			IndexerFuncs:        triggers,
			Indexers:            indexers,
			Codec:               config.Codec,
		})
		if err != nil {
			raw.Close()
			return nil, nil, fmt.Errorf("watch cache for %s: %w", config.GroupResource, err)
		}
		delegator := cacherstorage.NewCacheDelegator(cacher, checked)
		b.caches.add(cacher)
		var once sync.Once
		return delegator, func() {
			once.Do(func() {
				b.caches.remove(cacher)
				delegator.Stop()
				cacher.Stop()
				raw.Close()
			})
		}, nil
	}
}

// transformer is how gr's values are encrypted: Config.Transformers' or,
// without, stored as they are (refusing values that are encrypted).
func (b *Backend) transformer(gr schema.GroupResource) value.Transformer {
	if b.cfg.Transformers == nil {
		return identity.NewEncryptCheckTransformer()
	}
	return b.cfg.Transformers.TransformerForResource(gr)
}

// Raw returns a storage.Interface for objects of gr under resourcePrefix,
// without a watch cache: for objects the registry does not serve, such as
// the node port allocation bitmap. The caller calls the returned destroy
// function when done.
func (b *Backend) Raw(gr schema.GroupResource, resourcePrefix string, newFunc, newListFunc func() runtime.Object) (storage.Interface, func(), error) {
	opts, err := b.GetRESTOptions(gr, nil)
	if err != nil {
		return nil, nil, err
	}
	s, destroy, err := b.decorator(false)(opts.StorageConfig, resourcePrefix, nil, newFunc, newListFunc, nil, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	return s, destroy, nil
}

// WaitForCaches returns once every watch cache built so far has loaded
// its initial list from etcd, or with ctx's error. Until then a cache
// answers watches (and so informers) with 429 and a Retry-After of at least
// a second: a client started before the caches are ready loses that second.
func (b *Backend) WaitForCaches(ctx context.Context) error {
	return wait.PollUntilContextCancel(ctx, 5*time.Millisecond, true, func(context.Context) (bool, error) {
		return b.caches.ready(), nil
	})
}

// Check probes etcd the way kube-apiserver's etcd health check does: one
// read of "<prefix>/health" within the timeout.
func (b *Backend) Check(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := b.cfg.Client.Get(ctx, path.Join("/", b.cfg.Prefix, "health")); err != nil {
		return fmt.Errorf("error getting data from etcd: %w", err)
	}
	return nil
}

// Destroy stops the compactor. Resource storages are destroyed by their
// registries; the client belongs to the caller.
func (b *Backend) Destroy() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range b.destroys {
		d()
	}
	b.destroys = nil
}

// inProcessEndpoint names the one endpoint of an in-process etcd client,
// whose maintenance calls reach its server whatever the endpoint.
type inProcessEndpoint struct{ *clientv3.Client }

func (inProcessEndpoint) Endpoints() []string { return []string{"in-process"} }
