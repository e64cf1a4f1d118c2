// Package helmcontroller installs Helm charts declared as objects: k3s's
// HelmChart and HelmChartConfig kinds (helm.cattle.io/v1, the same
// fields), served as CustomResourceDefinitions and acted on by a
// controller in the server's process on Helm's own library
// (helm.sh/helm/v4's actions), not by a Job running an image as k3s's
// helm-controller does.
//
// A HelmChart is installed as the release of its name in its
// targetNamespace (default its own), upgraded when its chart or values
// change, and uninstalled when it is deleted (a finalizer holds it until
// then). Its values are its valuesContent and valuesSecrets, then those
// of the HelmChartConfig of its name, then set. Status and events say
// what happened; a failed attempt is undone (an install uninstalled, an
// upgrade rolled back) and tried again with backoff, unless its
// failurePolicy is abort.
package helmcontroller

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/internal/platform/reason"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	releasei "helm.sh/helm/v4/pkg/release"
	releasecommon "helm.sh/helm/v4/pkg/release/common"
	"helm.sh/helm/v4/pkg/storage/driver"
)

// finalizer holds a HelmChart until its release is uninstalled.
const finalizer = "helm.cattle.io/on-helm-chart-remove"

// defaultTimeout bounds an install, upgrade or uninstall without
// spec.timeout (helm's default).
const defaultTimeout = 5 * time.Minute

// Backoff of a HelmChart whose release fails.
const (
	minBackoff = time.Second
	maxBackoff = 5 * time.Minute
)

// workers is how many HelmCharts are worked on at once.
const workers = 2

// controller installs, upgrades and uninstalls the HelmCharts' releases.
type controller struct {
	client    kubernetes.Interface
	dyn       dynamic.Interface
	getter    clientGetter // a template: its namespace is set per release
	charts    cache.SharedIndexInformer
	configs   cache.SharedIndexInformer
	recorder  record.EventRecorder
	cacheDir  string
	logger    klog.Logger
	mu        sync.Mutex
	lastError map[string]string // the last failure of each HelmChart, to report a change once
}

// run runs the controller until ctx is done.
func run(ctx context.Context, config *rest.Config, cacheDir string) error {
	logger := klog.FromContext(ctx)
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cacheDir, 0o700); err != nil {
		return err
	}
	disco := memory.NewMemCacheClient(client.Discovery())
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	c := &controller{
		client: client, dyn: dyn,
		getter:   clientGetter{config: config, discovery: disco, mapper: restmapper.NewDeferredDiscoveryRESTMapper(disco)},
		charts:   factory.ForResource(chartsResource).Informer(),
		configs:  factory.ForResource(configsResource).Informer(),
		recorder: broadcaster.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: "helm-controller"}),
		cacheDir: cacheDir, logger: logger, lastError: map[string]string{},
	}
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.NewTypedItemExponentialFailureRateLimiter[string](minBackoff, maxBackoff),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "helmcharts"})
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	// A HelmChart is looked at again when its spec, deletion or
	// finalizers change, not when only its status does: the controller's
	// own status writes would fetch the chart again each time, and skip
	// the backoff of a failing one.
	if _, err := c.charts.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, DeleteFunc: enqueue,
		UpdateFunc: func(old, obj any) {
			if actedOn(old.(*unstructured.Unstructured), obj.(*unstructured.Unstructured)) {
				enqueue(obj)
			}
		}}); err != nil {
		return err
	}
	// A HelmChartConfig configures the HelmChart of its name.
	if _, err := c.configs.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.charts.HasSynced, c.configs.HasSynced) {
		return nil
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				key, shutdown := queue.Get()
				if shutdown {
					return
				}
				retry, err := c.sync(ctx, key)
				switch {
				case err != nil && ctx.Err() == nil:
					logger.Error(err, "HelmChart not reconciled; retrying", "helmChart", key)
					queue.AddRateLimited(key)
				case retry:
					queue.AddRateLimited(key)
				default:
					queue.Forget(key)
				}
				queue.Done(key)
			}
		})
	}
	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
	return nil
}

// actedOn reports whether the change from old to obj is one the
// controller acts on: spec (generation), deletion or finalizers.
func actedOn(old, obj *unstructured.Unstructured) bool {
	return old.GetGeneration() != obj.GetGeneration() || (old.GetDeletionTimestamp() == nil) != (obj.GetDeletionTimestamp() == nil) ||
		!slices.Equal(old.GetFinalizers(), obj.GetFinalizers())
}

// sync brings the release of the HelmChart key to what it declares. It
// reports a failure of the release (recorded in the HelmChart's status
// and events) by retry, and errors of the controller's own requests by
// err.
func (c *controller) sync(ctx context.Context, key string) (retry bool, err error) {
	obj, exists, err := c.charts.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		return false, err
	}
	u := obj.(*unstructured.Unstructured)
	hc := &HelmChart{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, hc); err != nil {
		c.recorder.Eventf(u, corev1.EventTypeWarning, reasonInvalidChart, "Not a HelmChart: %v", err)
		return false, nil
	}
	if hc.DeletionTimestamp != nil {
		return c.uninstall(ctx, u, hc)
	}
	if !slices.Contains(hc.Finalizers, finalizer) {
		// The update comes back as an event, and sync again.
		return false, c.setFinalizers(ctx, u, append(slices.Clone(hc.Finalizers), finalizer))
	}
	config, err := c.chartConfig(key)
	if err != nil {
		return false, err
	}
	return c.deploy(ctx, u, hc, config)
}

// chartConfig is the HelmChartConfig of key, if any.
func (c *controller) chartConfig(key string) (*HelmChartConfig, error) {
	obj, exists, err := c.configs.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		return nil, err
	}
	config := &HelmChartConfig{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.(*unstructured.Unstructured).Object, config); err != nil {
		return nil, fmt.Errorf("HelmChartConfig %s: %w", key, err)
	}
	return config, nil
}

// deploy installs or upgrades hc's release, unless what it would deploy
// (chart, values, namespace) is what its status says is deployed.
func (c *controller) deploy(ctx context.Context, u *unstructured.Unstructured, hc *HelmChart, config *HelmChartConfig) (bool, error) {
	namespace := targetNamespace(hc)
	policy := failurePolicy(hc, config)
	archive, err := chartArchive(ctx, c.client, hc, c.cacheDir)
	if err != nil {
		return c.failed(ctx, u, hc, err, policy)
	}
	vals, err := values(ctx, c.client, hc, config)
	if err != nil {
		return c.failed(ctx, u, hc, err, policy)
	}
	digest, err := digestOf(archive, vals, namespace)
	if err != nil {
		return false, err
	}
	cfg, err := c.actions(namespace)
	if err != nil {
		return false, err
	}
	last, err := lastRelease(cfg, hc.Name)
	if err != nil {
		return false, err
	}
	if last != nil && last.Status() == releasecommon.StatusDeployed.String() && hc.Status.Digest == digest {
		return false, c.setStatus(ctx, u, hc, last.Version(), digest, nil)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		return c.failed(ctx, u, hc, reason.Wrap(reasonInvalidChart, fmt.Errorf("the chart's archive: %w", err)), policy)
	}
	timeout := defaultTimeout
	if hc.Spec.Timeout != nil && hc.Spec.Timeout.Duration > 0 {
		timeout = hc.Spec.Timeout.Duration
	}
	var rel releasei.Releaser
	verb, failure := "Installed", "InstallFailed"
	if last == nil {
		install := action.NewInstall(cfg)
		install.ReleaseName, install.Namespace, install.CreateNamespace = hc.Name, namespace, hc.Spec.CreateNamespace
		install.Timeout, install.WaitStrategy = timeout, kube.HookOnlyStrategy
		rel, err = install.RunWithContext(ctx, ch, vals)
		if err != nil && policy == policyReinstall {
			// Undone: the next attempt installs anew.
			err = c.undoInstall(cfg, hc.Name, timeout, err)
		}
	} else {
		verb, failure = "Upgraded", "UpgradeFailed"
		upgrade := action.NewUpgrade(cfg)
		upgrade.Namespace, upgrade.Timeout, upgrade.WaitStrategy = namespace, timeout, kube.HookOnlyStrategy
		upgrade.MaxHistory = maxHistory
		rel, err = upgrade.RunWithContext(ctx, hc.Name, ch, vals)
		if err != nil && policy == policyReinstall {
			err = c.undoUpgrade(cfg, hc.Name, timeout, last, err)
		}
	}
	if err != nil {
		return c.failed(ctx, u, hc, reason.Wrap(failure, err), policy)
	}
	acc, err := releasei.NewAccessor(rel)
	if err != nil {
		return false, err
	}
	c.recorder.Eventf(u, corev1.EventTypeNormal, verb, "%s release %s/%s revision %d (chart %s %s)", verb, namespace, hc.Name,
		acc.Version(), ch.Metadata.Name, ch.Metadata.Version)
	c.logger.Info(verb+" a HelmChart's release", "helmChart", klog.KObj(hc), "release", namespace+"/"+hc.Name, "revision", acc.Version())
	c.forgetFailure(hc)
	return false, c.setStatus(ctx, u, hc, acc.Version(), digest, nil)
}

// maxHistory is how many revisions of a release are kept.
const maxHistory = 10

// undoInstall uninstalls what a failed install left, and returns its
// error.
func (c *controller) undoInstall(cfg *action.Configuration, name string, timeout time.Duration, failure error) error {
	uninstall := action.NewUninstall(cfg)
	uninstall.Timeout, uninstall.WaitStrategy = timeout, kube.HookOnlyStrategy
	if _, err := uninstall.Run(name); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return fmt.Errorf("%w (and uninstalling what it left: %v)", failure, err)
	}
	return fmt.Errorf("%w (undone)", failure)
}

// undoUpgrade rolls a failed upgrade back to the revision before it,
// and returns its error.
func (c *controller) undoUpgrade(cfg *action.Configuration, name string, timeout time.Duration, before releasei.Accessor, failure error) error {
	now, err := lastRelease(cfg, name)
	if err != nil || now == nil || now.Version() == before.Version() {
		// Nothing was written (the chart did not render): nothing to undo.
		return failure
	}
	rollback := action.NewRollback(cfg)
	rollback.Version, rollback.Timeout, rollback.WaitStrategy = before.Version(), timeout, kube.HookOnlyStrategy
	rollback.MaxHistory = maxHistory
	if err := rollback.Run(name); err != nil {
		return fmt.Errorf("%w (and rolling back to revision %d: %v)", failure, before.Version(), err)
	}
	return fmt.Errorf("%w (rolled back to revision %d)", failure, before.Version())
}

// failed records a failed attempt: a Warning event and log line when the
// failure is new, and the Failed condition. It is retried unless the
// policy is abort.
func (c *controller) failed(ctx context.Context, u *unstructured.Unstructured, hc *HelmChart, failure error, policy string) (bool, error) {
	why := reason.Of(failure, "Failed")
	key := hc.Namespace + "/" + hc.Name
	c.mu.Lock()
	repeated := c.lastError[key] == failure.Error()
	c.lastError[key] = failure.Error()
	c.mu.Unlock()
	if !repeated {
		c.recorder.Event(u, corev1.EventTypeWarning, why, failure.Error())
		c.logger.Error(failure, "A HelmChart's release failed", "helmChart", klog.KObj(hc), "reason", why, "failurePolicy", policy)
	}
	if err := c.setStatus(ctx, u, hc, hc.Status.Revision, hc.Status.Digest, &chartCondition{Type: conditionFailed, Status: string(metav1.ConditionTrue),
		Reason: why, Message: failure.Error()}); err != nil {
		return false, err
	}
	return policy != policyAbort, nil
}

// forgetFailure forgets hc's last failure: the same failure after a
// success is new again.
func (c *controller) forgetFailure(hc *HelmChart) {
	c.mu.Lock()
	delete(c.lastError, hc.Namespace+"/"+hc.Name)
	c.mu.Unlock()
}

// uninstall uninstalls a deleted HelmChart's release and lets it go.
func (c *controller) uninstall(ctx context.Context, u *unstructured.Unstructured, hc *HelmChart) (bool, error) {
	if !slices.Contains(hc.Finalizers, finalizer) {
		return false, nil
	}
	namespace := targetNamespace(hc)
	cfg, err := c.actions(namespace)
	if err != nil {
		return false, err
	}
	uninstall := action.NewUninstall(cfg)
	uninstall.Timeout, uninstall.WaitStrategy = defaultTimeout, kube.HookOnlyStrategy
	switch _, err := uninstall.Run(hc.Name); {
	case errors.Is(err, driver.ErrReleaseNotFound):
	case err != nil:
		c.recorder.Eventf(u, corev1.EventTypeWarning, "UninstallFailed", "Uninstalling release %s/%s: %v", namespace, hc.Name, err)
		return true, nil
	default:
		c.recorder.Eventf(u, corev1.EventTypeNormal, "Uninstalled", "Uninstalled release %s/%s", namespace, hc.Name)
		c.logger.Info("Uninstalled a deleted HelmChart's release", "helmChart", klog.KObj(hc), "release", namespace+"/"+hc.Name)
	}
	c.forgetFailure(hc)
	return false, c.setFinalizers(ctx, u, slices.DeleteFunc(slices.Clone(hc.Finalizers), func(f string) bool { return f == finalizer }))
}

// actions is Helm's action configuration for releases in namespace,
// stored as Helm stores them (Secrets in the release's namespace).
func (c *controller) actions(namespace string) (*action.Configuration, error) {
	getter := c.getter
	getter.namespace = namespace
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(logr.ToSlogHandler(c.logger.WithName("helm"))))
	if err := cfg.Init(&getter, namespace, "secret"); err != nil {
		return nil, err
	}
	// The chart's objects without a namespace go to the release's (the
	// client would take the kubeconfig's, which has none to give).
	kc, ok := cfg.KubeClient.(*kube.Client)
	if !ok {
		return nil, fmt.Errorf("helm's kube client is a %T", cfg.KubeClient)
	}
	kc.Namespace = namespace
	return cfg, nil
}

// lastRelease is the newest revision of release name, or nil if it has
// none.
func lastRelease(cfg *action.Configuration, name string) (releasei.Accessor, error) {
	history, err := action.NewHistory(cfg).Run(name)
	if errors.Is(err, driver.ErrReleaseNotFound) || (err == nil && len(history) == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var last releasei.Accessor
	for _, r := range history {
		acc, err := releasei.NewAccessor(r)
		if err != nil {
			return nil, err
		}
		if last == nil || acc.Version() > last.Version() {
			last = acc
		}
	}
	return last, nil
}

// setFinalizers writes the HelmChart's finalizers.
func (c *controller) setFinalizers(ctx context.Context, u *unstructured.Unstructured, finalizers []string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": finalizers, "resourceVersion": u.GetResourceVersion()}})
	if err != nil {
		return err
	}
	_, err = c.dyn.Resource(chartsResource).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), "application/merge-patch+json", patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// setStatus writes the HelmChart's status: the revision deployed and
// its digest, Deployed, and Failed (failure, or False without one).
func (c *controller) setStatus(ctx context.Context, u *unstructured.Unstructured, hc *HelmChart, revision int, digest string, failure *chartCondition) error {
	status := hc.Status
	status.ObservedGeneration, status.Revision, status.Digest = hc.Generation, revision, digest
	deployed := chartCondition{Type: conditionDeployed, Status: string(metav1.ConditionFalse), Reason: "NotDeployed"}
	if revision > 0 && failure == nil {
		deployed = chartCondition{Type: conditionDeployed, Status: string(metav1.ConditionTrue), Reason: "Deployed",
			Message: fmt.Sprintf("release %s/%s revision %d", targetNamespace(hc), hc.Name, revision)}
	} else if revision > 0 {
		deployed = chartCondition{Type: conditionDeployed, Status: string(metav1.ConditionTrue), Reason: "PreviousRevision",
			Message: fmt.Sprintf("release %s/%s revision %d, before the change that failed", targetNamespace(hc), hc.Name, revision)}
	}
	failed := chartCondition{Type: conditionFailed, Status: string(metav1.ConditionFalse)}
	if failure != nil {
		failed = *failure
	}
	status.Conditions = setCondition(setCondition(status.Conditions, deployed), failed)
	if equalStatus(status, hc.Status) {
		return nil
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&status)
	if err != nil {
		return err
	}
	updated := u.DeepCopy()
	updated.Object["status"] = content
	_, err = c.dyn.Resource(chartsResource).Namespace(u.GetNamespace()).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Deleted, or changed: the change's event syncs again.
		return nil
	}
	return err
}

// setCondition sets cond in conds, its transition time kept while its
// status stays.
func setCondition(conds []chartCondition, cond chartCondition) []chartCondition {
	for i, c := range conds {
		if c.Type != cond.Type {
			continue
		}
		cond.LastTransitionTime = c.LastTransitionTime
		if c.Status != cond.Status {
			cond.LastTransitionTime = metav1.Now()
		}
		out := slices.Clone(conds)
		out[i] = cond
		return out
	}
	cond.LastTransitionTime = metav1.Now()
	return append(slices.Clone(conds), cond)
}

func equalStatus(a, b HelmChartStatus) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// digestOf hashes what a release is made of.
func digestOf(archive []byte, vals map[string]any, namespace string) (string, error) {
	v, err := json.Marshal(vals) // map keys sorted
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, part := range [][]byte{archive, v, []byte(namespace)} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func targetNamespace(hc *HelmChart) string {
	if hc.Spec.TargetNamespace != "" {
		return hc.Spec.TargetNamespace
	}
	return hc.Namespace
}

// failurePolicy is the HelmChartConfig's, else the HelmChart's, else
// reinstall.
func failurePolicy(hc *HelmChart, config *HelmChartConfig) string {
	if config != nil && config.Spec.FailurePolicy != "" {
		return config.Spec.FailurePolicy
	}
	if hc.Spec.FailurePolicy != "" {
		return hc.Spec.FailurePolicy
	}
	return policyReinstall
}
