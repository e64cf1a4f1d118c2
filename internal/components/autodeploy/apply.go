package autodeploy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/kubeboot/kubeboot/internal/platform/manifests"
	"github.com/kubeboot/kubeboot/internal/platform/reason"
)

// Event reasons, on a file's record.
const (
	ReasonApplied     = "Applied"
	ReasonInvalid     = "Invalid"     // the file does not parse, or an object lacks its name
	ReasonUnknownKind = "UnknownKind" // the server serves no such kind
	ReasonRefused     = "Refused"     // the server's dry run refused an object: invalid, or a conflict
	ReasonApplyFailed = "ApplyFailed" // the apply itself failed, after its dry run passed
	ReasonPruneFailed = "PruneFailed" // an object the file no longer holds could not be deleted
)

// crdEstablished bounds the wait for a CustomResourceDefinition applied
// from a file to serve its kind, before that file's objects of the kind.
const crdEstablished = 30 * time.Second

// applier applies the directory's files, one at a time.
type applier struct {
	// server names this server in records: its advertise address.
	server   string
	dir      string
	skip     []string
	client   kubernetes.Interface
	dyn      dynamic.Interface
	mapper   *restmapper.DeferredDiscoveryRESTMapper
	recorder record.EventRecorder
	// reported holds, by file, the checksum of content that cannot apply
	// until the file changes (it does not parse), once its event is sent:
	// each resync would repeat it. Files sync in parallel, each in one
	// worker at a time.
	reported sync.Map
}

// object is one object of a file, ready to apply.
type object struct {
	source string
	u      *unstructured.Unstructured
	// mapping is its resource; nil while it is of a kind a
	// CustomResourceDefinition of the same file defines, not yet served.
	mapping *meta.RESTMapping
}

func (o *object) ref() ref {
	return ref{APIVersion: o.u.GetAPIVersion(), Kind: o.u.GetKind(), Namespace: o.u.GetNamespace(), Name: o.u.GetName()}
}

// skipped reports whether a file is left alone: NAME.skip is beside it,
// or --disable names it or its name without extension.
func (a *applier) skipped(file string) bool {
	if slices.Contains(a.skip, file) || slices.Contains(a.skip, strings.TrimSuffix(file, filepath.Ext(file))) {
		return true
	}
	_, err := os.Stat(filepath.Join(a.dir, file+skipSuffix))
	return err == nil
}

// sync brings the cluster to what file holds: applies it if it changed
// since it was last applied, deletes what it no longer holds, and all of
// it once it is removed from the directory of the server that last
// applied it. An error is retried.
func (a *applier) sync(ctx context.Context, file string) error {
	path := filepath.Join(a.dir, file)
	logger := klog.FromContext(ctx).WithValues("file", path)
	if a.skipped(file) {
		return nil
	}
	rec, err := a.record(ctx, file)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		// Each server of a cluster applies its own directory: a file
		// applied from another server's is that server's to remove.
		if rec == nil || rec.server != a.server {
			return nil
		}
		if err := a.delete(ctx, rec.objects); err != nil {
			logger.Error(err, "Deleting the objects of a removed manifest")
			return err
		}
		if err := a.client.CoreV1().ConfigMaps(Namespace).Delete(ctx, rec.cm.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		logger.Info("Deleted the objects of a removed manifest", "objects", len(rec.objects))
		return nil
	}
	if err != nil {
		return err
	}
	sum := checksum(data)
	if reported, _ := a.reported.Load(file); (rec != nil && rec.checksum == sum) || reported == sum {
		return nil
	}
	if rec == nil {
		// The record exists before anything is applied: the events
		// are on it.
		rec = &fileRecord{file: file, server: a.server}
		if err := a.save(ctx, rec); err != nil {
			return err
		}
	}
	objects, err := a.plan(ctx, path, data)
	if err == nil {
		err = a.apply(ctx, objects, true)
	}
	if err == nil {
		err = a.apply(ctx, objects, false)
	}
	var refs []ref
	for _, o := range objects {
		refs = append(refs, o.ref())
	}
	var stale []ref
	if err == nil {
		for _, r := range rec.objects {
			if !slices.Contains(refs, r) {
				stale = append(stale, r)
			}
		}
		if err = a.delete(ctx, stale); err != nil {
			err = reason.Wrap(ReasonPruneFailed, err)
		}
	}
	if err != nil {
		why := reason.Of(err, ReasonApplyFailed)
		a.recorder.Eventf(rec.cm, corev1.EventTypeWarning, why, "%s: %v", file, err)
		if why == ReasonInvalid {
			a.reported.Store(file, sum)
			logger.Error(err, "Manifest not applied: nothing of it is, until the file changes")
			return nil
		}
		if why == ReasonApplyFailed || why == ReasonPruneFailed {
			logger.Error(err, "Applying a manifest failed; it is tried again")
			// Part of it may be applied: the record knows those objects
			// too, so that removing the file before it applies deletes
			// them; its checksum stays the last applied.
			rec.server = a.server
			for _, r := range refs {
				if !slices.Contains(rec.objects, r) {
					rec.objects = append(rec.objects, r)
				}
			}
			if err := a.save(ctx, rec); err != nil {
				logger.Error(err, "Recording a manifest's objects")
			}
		} else {
			logger.Error(err, "Manifest not applied: nothing of it is; it is tried again", "reason", why)
		}
		return err
	}
	a.reported.Delete(file)
	rec.checksum, rec.objects, rec.server = sum, refs, a.server
	if err := a.save(ctx, rec); err != nil {
		return err
	}
	a.recorder.Eventf(rec.cm, corev1.EventTypeNormal, ReasonApplied, "%s: applied %d objects, deleted %d", file, len(refs), len(stale))
	logger.Info("Applied a manifest", "objects", len(refs), "deleted", len(stale))
	return nil
}

// plan decodes a file's objects, in the order they are applied
// (Namespaces, then CustomResourceDefinitions, then the rest as written),
// each mapped to its resource and namespace.
func (a *applier) plan(ctx context.Context, path string, data []byte) ([]*object, error) {
	docs, err := manifests.Parse(path, data)
	if err != nil {
		return nil, reason.Wrap(ReasonInvalid, err)
	}
	var objects []*object
	add := func(source string, u *unstructured.Unstructured) error {
		if u.GetName() == "" {
			return reason.Wrap(ReasonInvalid, fmt.Errorf("%s: %s: metadata.name: Required value", source, u.GetKind()))
		}
		objects = append(objects, &object{source: source, u: u})
		return nil
	}
	for _, doc := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc.Data, &u.Object); err != nil {
			return nil, reason.Wrap(ReasonInvalid, fmt.Errorf("%s: %w", doc.Source, err))
		}
		if !u.IsList() {
			if err := add(doc.Source, u); err != nil {
				return nil, err
			}
			continue
		}
		list, err := u.ToList()
		if err != nil {
			return nil, reason.Wrap(ReasonInvalid, fmt.Errorf("%s: %w", doc.Source, err))
		}
		for i := range list.Items {
			if err := add(fmt.Sprintf("%s item %d", doc.Source, i), &list.Items[i]); err != nil {
				return nil, err
			}
		}
	}
	rank := func(o *object) int {
		switch o.u.GroupVersionKind().GroupKind() {
		case schema.GroupKind{Kind: "Namespace"}:
			return 0
		case crdKind:
			return 1
		}
		return 2
	}
	slices.SortStableFunc(objects, func(x, y *object) int { return rank(x) - rank(y) })

	defined := definedKinds(objects)
	for _, o := range objects {
		gvk := o.u.GroupVersionKind()
		namespaced, isDefined := defined[gvk.GroupKind()]
		mapping, err := a.mapping(gvk)
		switch {
		case err == nil:
			o.mapping = mapping
			namespaced = mapping.Scope.Name() == meta.RESTScopeNameNamespace
		case meta.IsNoMatchError(err) && isDefined:
		case meta.IsNoMatchError(err):
			return nil, reason.Wrap(ReasonUnknownKind, fmt.Errorf("%s: the server serves no kind %s in %s", o.source, gvk.Kind, gvk.GroupVersion()))
		default:
			return nil, err
		}
		switch {
		case !namespaced:
			o.u.SetNamespace("")
		case o.u.GetNamespace() == "":
			// As kubectl applies it, in the default namespace.
			o.u.SetNamespace(metav1.NamespaceDefault)
		}
	}
	return objects, ctx.Err()
}

// crdKind is CustomResourceDefinition's group and kind.
var crdKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// definedKinds are the kinds the CustomResourceDefinitions among objects
// define, each with whether it is namespaced.
func definedKinds(objects []*object) map[schema.GroupKind]bool {
	kinds := map[schema.GroupKind]bool{}
	for _, o := range objects {
		if o.u.GroupVersionKind().GroupKind() != crdKind {
			continue
		}
		group, _, _ := unstructured.NestedString(o.u.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(o.u.Object, "spec", "names", "kind")
		scope, _, _ := unstructured.NestedString(o.u.Object, "spec", "scope")
		kinds[schema.GroupKind{Group: group, Kind: kind}] = scope != "Cluster"
	}
	return kinds
}

// mapping is gvk's resource, from discovery; a kind discovery did not
// know is looked for again once, in case it is new.
func (a *applier) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		a.mapper.Reset()
		mapping, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	return mapping, err
}

// apply applies objects in order, as a server-side dry run first: a
// dry run refused makes the file's fault a reason.Error. A dry run passes
// over what cannot be tried before what comes before it in the file is
// applied: objects of a kind the file defines, and objects in a namespace
// the file creates.
func (a *applier) apply(ctx context.Context, objects []*object, dryRun bool) error {
	namespaces := map[string]bool{}
	for _, o := range objects {
		if o.u.GroupVersionKind().GroupKind() == (schema.GroupKind{Kind: "Namespace"}) {
			namespaces[o.u.GetName()] = true
		}
	}
	opts := metav1.ApplyOptions{FieldManager: FieldManager}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for _, o := range objects {
		if o.mapping == nil {
			if dryRun {
				continue
			}
			if err := a.waitServed(ctx, o); err != nil {
				return err
			}
		}
		_, err := a.resource(o.mapping, o.u.GetNamespace()).Apply(ctx, o.u.GetName(), o.u, opts)
		if err == nil || (dryRun && namespaces[missingNamespace(err)]) {
			continue
		}
		err = fmt.Errorf("%s: %s: %w", o.source, o.ref(), err)
		if dryRun && apierrors.ReasonForError(err) != metav1.StatusReasonUnknown && !apierrors.IsServerTimeout(err) && !apierrors.IsTooManyRequests(err) {
			return reason.Wrap(ReasonRefused, err)
		}
		return err
	}
	return nil
}

// missingNamespace is the namespace err says does not exist, if it says so.
func missingNamespace(err error) string {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return ""
	}
	if d := status.Status().Details; d != nil && d.Group == "" && d.Kind == "namespaces" {
		return d.Name
	}
	return ""
}

// waitServed waits until the kind of o, which a CustomResourceDefinition
// of its file defines, is served.
func (a *applier) waitServed(ctx context.Context, o *object) error {
	gvk := o.u.GroupVersionKind()
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, crdEstablished, true, func(context.Context) (bool, error) {
		mapping, err := a.mapping(gvk)
		if meta.IsNoMatchError(err) {
			return false, nil
		}
		o.mapping = mapping
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("%s: kind %s of %s not served within %s: %w", o.source, gvk.Kind, gvk.GroupVersion(), crdEstablished, err)
	}
	return nil
}

// resource is the client of mapping's resource, in namespace.
func (a *applier) resource(mapping *meta.RESTMapping, namespace string) dynamic.ResourceInterface {
	r := a.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		return r.Namespace(namespace)
	}
	return r
}

// delete deletes the objects refs name, last first (custom resources
// before their definitions, namespaces last); objects already gone, or of
// a kind no longer served, are done.
func (a *applier) delete(ctx context.Context, refs []ref) error {
	var errs []error
	background := metav1.DeletePropagationBackground
	for _, r := range slices.Backward(refs) {
		gvk := schema.FromAPIVersionAndKind(r.APIVersion, r.Kind)
		mapping, err := a.mapping(gvk)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err == nil {
			err = a.resource(mapping, r.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{PropagationPolicy: &background})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting %s: %w", r, err))
		}
	}
	return errors.Join(errs...)
}
