// Package event serves Events, both as core/v1 and events.k8s.io/v1: one
// etcd key space, stored as core/v1, with a time to live.
package event

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/kubeboot/kubeboot/internal/api/validation"
	"github.com/kubeboot/kubeboot/internal/printers"
	"github.com/kubeboot/kubeboot/internal/registry"
)

// DefaultTTL is how long an Event is kept after its last write, as
// kube-apiserver's --event-ttl default.
const DefaultTTL = time.Hour

// NewREST returns the events storage of a group ("" or events.k8s.io).
func NewREST(opts generic.RESTOptionsGetter, typer runtime.ObjectTyper, group string, ttl time.Duration) (*registry.REST, error) {
	shortNames := []string{"ev"}
	r, err := registry.NewStore(opts, registry.StoreConfig{
		Resource:   schema.GroupResource{Group: group, Resource: "events"},
		Singular:   "event",
		New:        func() runtime.Object { return &corev1.Event{} },
		NewList:    func() runtime.Object { return &corev1.EventList{} },
		Strategy:   Strategy(typer),
		Table:      printers.Events(),
		Attrs:      attrs,
		ShortNames: shortNames,
	})
	if err != nil {
		return nil, err
	}
	secs := uint64(ttl.Seconds())
	r.TTLFunc = func(runtime.Object, uint64, bool) (uint64, error) { return secs, nil }
	return r, nil
}

// Strategy validates events according to the API group of the request:
// events.k8s.io/v1 requires more fields than core/v1.
func Strategy(typer runtime.ObjectTyper) registry.Strategy[*corev1.Event] {
	s := registry.NewStrategy(typer, true, registry.Hooks[*corev1.Event]{
		OnValidate: func(ctx context.Context, e *corev1.Event) field.ErrorList {
			return validation.ValidateEvent(e, requestGroup(ctx))
		},
		OnValidateUpdate: func(ctx context.Context, e, old *corev1.Event) field.ErrorList {
			return validation.ValidateEventUpdate(e, old, requestGroup(ctx))
		},
	})
	s.CreateOnUpdate = true
	return s
}

func requestGroup(ctx context.Context) string {
	if info, ok := request.RequestInfoFrom(ctx); ok && info.APIGroup == eventsv1.GroupName {
		return eventsv1.GroupName
	}
	return ""
}

// attrs adds the field selectors kube-apiserver supports for events.
func attrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	e, ok := obj.(*corev1.Event)
	if !ok {
		return nil, nil, fmt.Errorf("not an event: %T", obj)
	}
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	return e.Labels, registry.ObjectMetaFields(&e.ObjectMeta, true, fields.Set{
		"involvedObject.kind":            e.InvolvedObject.Kind,
		"involvedObject.namespace":       e.InvolvedObject.Namespace,
		"involvedObject.name":            e.InvolvedObject.Name,
		"involvedObject.uid":             string(e.InvolvedObject.UID),
		"involvedObject.apiVersion":      e.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": e.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       e.InvolvedObject.FieldPath,
		"reason":                         e.Reason,
		"reportingComponent":             e.ReportingController,
		"source":                         source,
		"type":                           e.Type,
	}), nil
}
