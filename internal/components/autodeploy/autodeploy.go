// Package autodeploy applies the manifests in the server's manifests
// directory, <data-dir>/server/manifests (k3s's auto-deploying
// manifests): each .yaml, .yml and .json file there is applied with
// server-side apply under one field manager, applied again when it
// changes, and the objects it held are deleted when it no longer holds
// them or is removed. A file NAME.skip beside NAME, or --disable naming
// it, leaves NAME alone.
//
// What each file applied is recorded in a ConfigMap in kube-system (its
// checksum and objects), so a restart applies nothing twice and a removed
// file's objects are known. Each server of a cluster applies its own
// directory, as k3s's do: the same file on each applies once, and a file
// is removed from the cluster when the server that last applied it
// removes it. A file is applied whole or not at all when
// the fault is the file's: one that does not parse, names a kind the
// server does not serve, or holds an object the server refuses or that
// conflicts with another field manager (a server-side dry run of every
// object comes first) applies nothing and says so in an event on its
// record and a log line naming the file and line; the other files apply.
package autodeploy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/controlplane"
)

const (
	// User is the user the manifests are applied as.
	User = "system:kubeboot:manifests"
	// FieldManager is the field manager of every apply.
	FieldManager = "kubeboot-manifests"
	// Namespace holds the records of what each file applied.
	Namespace = metav1.NamespaceSystem
	// FileLabel, on a record, is the file's name.
	FileLabel = "kubeboot.io/manifest"
	// skipSuffix, after a file's name, names a file whose presence leaves
	// it alone.
	skipSuffix = ".skip"
)

// Timing: a file's writes settle for a moment before it is read; every
// file is looked at again each resync, for changes the directory's watch
// missed; a file that failed is tried again after a backoff.
const (
	settle     = 200 * time.Millisecond
	resync     = time.Minute
	minBackoff = time.Second
	maxBackoff = 5 * time.Minute
)

// Files are applied by a few workers at once, each request of theirs
// within the applier's client-side rate limit.
const (
	workers     = 4
	clientQPS   = 500
	clientBurst = 1000
)

// Dir is the manifests directory of a server's data dir.
func Dir(dataDir string) string { return filepath.Join(dataDir, "server", "manifests") }

// Component applies the manifests directory's files.
type Component struct {
	skip []string
	dir  string
}

// New returns the component; a file whose name, or name without its
// extension, is in skip is left alone (--disable).
func New(skip []string) *Component { return &Component{skip: skip} }

// Name implements controlplane.Component.
func (*Component) Name() string { return "manifests" }

// Complete implements controlplane.Component.
func (c *Component) Complete(s controlplane.Settings) (controlplane.Needs, error) {
	c.dir = Dir(s.DataDir)
	return controlplane.Needs{
		User: User,
		// The files are the administrator's, and may hold any object
		// (RBAC rules included, which only a holder of their rights may
		// grant).
		Grant: controlplane.GrantClusterRole(User, User,
			rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
			rbacv1.PolicyRule{NonResourceURLs: []string{"*"}, Verbs: []string{"*"}}),
		Allowed: authorizationv1.ResourceAttributes{Verb: "create", Resource: "configmaps", Namespace: Namespace},
	}, nil
}

// Run implements controlplane.Component: it watches the directory and,
// once it holds a manifest (or a record of one applied before remains,
// whose objects go with it), applies each file with a few workers, again
// at each change and every resync. Until then only the directory's watch
// runs.
func (c *Component) Run(ctx context.Context, s *controlplane.Server) error {
	logger := klog.FromContext(ctx).WithName("manifests")
	ctx = klog.NewContext(ctx, logger)
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer watcher.Close()
	if err := watcher.Add(c.dir); err != nil {
		return err
	}
	a, err := c.newApplier(s)
	if err != nil {
		return err
	}
	if err := a.waitForManifests(ctx, watcher); err != nil {
		return nil
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: a.client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	a.recorder = broadcaster.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: "kubeboot-manifests"})
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.NewTypedItemExponentialFailureRateLimiter[string](minBackoff, maxBackoff),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "manifests"})
	defer queue.ShutDown()
	for range workers {
		go a.work(ctx, queue)
	}
	a.follow(ctx, watcher, queue)
	return nil
}

// newApplier returns the applier of the directory, acting as User on s.
func (c *Component) newApplier(s *controlplane.Server) (*applier, error) {
	cfg, err := s.ClientConfig(User)
	if err != nil {
		return nil, err
	}
	// Each worker spends a dozen requests or so on a file (its objects
	// tried, applied, recorded): the loopback's 50 a second would set
	// their pace. The server's priority and fairness still governs.
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &applier{
		server: s.AdvertiseAddress().String(), dir: c.dir, skip: c.skip, client: client, dyn: dyn,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery())),
	}, nil
}

// waitForManifests returns once there is a file to apply or a record to
// act on: at once if there is, else at the directory's first manifest
// (looked for again every resync, for an event the watch missed). It
// returns ctx's error when ctx is done first.
func (a *applier) waitForManifests(ctx context.Context, watcher *fsnotify.Watcher) error {
	if names, err := a.names(ctx); len(names) > 0 || err != nil {
		// A failed look is no reason to wait: the workers try again.
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev := <-watcher.Events:
			if _, ok := manifestName(filepath.Base(ev.Name)); ok {
				return nil
			}
		case <-watcher.Errors:
			// Events were lost: the workers look at every file.
			return nil
		case <-time.After(resync):
			if names, _ := a.fileNames(); len(names) > 0 {
				return nil
			}
		}
	}
}

// work applies the files queue names, until it shuts down.
func (a *applier) work(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string]) {
	for {
		name, shutdown := queue.Get()
		if shutdown {
			return
		}
		if err := a.sync(ctx, name); err != nil {
			queue.AddRateLimited(name)
		} else {
			queue.Forget(name)
		}
		queue.Done(name)
	}
}

// follow queues every file now, each file that changes once its writes
// settle, and every file again each resync and when the watch lost
// events, until ctx is done.
func (a *applier) follow(ctx context.Context, watcher *fsnotify.Watcher, queue workqueue.TypedRateLimitingInterface[string]) {
	logger := klog.FromContext(ctx)
	enqueueAll := func() {
		names, err := a.names(ctx)
		if err != nil {
			logger.Error(err, "Listing the manifests")
		}
		for _, name := range names {
			queue.Add(name)
		}
	}
	enqueueAll()
	ticker := time.NewTicker(resync)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-watcher.Events:
			if name, ok := manifestName(filepath.Base(ev.Name)); ok {
				queue.AddAfter(name, settle)
			}
		case err := <-watcher.Errors:
			// Events were lost (the kernel's queue overflowed): look at
			// every file.
			logger.Error(err, "Watching the manifests directory", "dir", a.dir)
			enqueueAll()
		case <-ticker.C:
			enqueueAll()
		}
	}
}

// manifestName is the manifest a file in the directory concerns: itself,
// or for NAME.skip, NAME.
func manifestName(file string) (string, bool) {
	name := strings.TrimSuffix(file, skipSuffix)
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return name, true
	}
	return "", false
}

// names are the manifests the directory holds or the records name.
func (a *applier) names(ctx context.Context) ([]string, error) {
	names, dirErr := a.fileNames()
	records, err := a.records(ctx)
	for _, r := range records {
		names = append(names, r.file)
	}
	slices.Sort(names)
	return slices.Compact(names), errors.Join(dirErr, err)
}

// fileNames are the manifests the directory holds.
func (a *applier) fileNames() ([]string, error) {
	var names []string
	entries, err := os.ReadDir(a.dir)
	for _, e := range entries {
		if name, ok := manifestName(e.Name()); ok && !e.IsDir() {
			names = append(names, name)
		}
	}
	return names, err
}
