package validation

import (
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// EventsGroup is the API group of events.k8s.io/v1 requests, whose Events
// are validated strictly.
const EventsGroup = "events.k8s.io"

// Length limits of new-style events (those with eventTime set).
const (
	reportingInstanceLengthLimit = 128
	actionLengthLimit            = 128
	reasonLengthLimit            = 128
	noteLengthLimit              = 1024
)

// ValidateEvent validates an Event on create. requestGroup is the API group
// of the request: "" (core/v1) or EventsGroup (events.k8s.io/v1).
//
// As in kube-apiserver, core/v1 requests get only the lenient legacy
// checks, which old clients rely on (the generic registry still checks the
// name is a valid path segment), while events.k8s.io/v1 requests must also
// be well-formed new-style events: eventTime, reportingController,
// reportingInstance and action set, the deprecated fields unset. Errors use
// core/v1 field names (message, involvedObject), as kube-apiserver's do.
func ValidateEvent(e *corev1.Event, requestGroup string) field.ErrorList {
	allErrs := validateLegacyEvent(e)
	if requestGroup != EventsGroup {
		return allErrs
	}
	allErrs = append(allErrs, validateObjectMeta(&e.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain)...)
	allErrs = append(allErrs, validateEventSeries(e)...)
	if e.EventTime.IsZero() {
		allErrs = append(allErrs, field.Required(field.NewPath("eventTime"), ""))
	}
	if e.Type != corev1.EventTypeNormal && e.Type != corev1.EventTypeWarning {
		allErrs = append(allErrs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", e.Type)))
	}
	if !e.FirstTimestamp.IsZero() {
		allErrs = append(allErrs, field.Invalid(field.NewPath("firstTimestamp"), "", "needs to be unset"))
	}
	if !e.LastTimestamp.IsZero() {
		allErrs = append(allErrs, field.Invalid(field.NewPath("lastTimestamp"), "", "needs to be unset"))
	}
	if e.Count != 0 {
		allErrs = append(allErrs, field.Invalid(field.NewPath("count"), "", "needs to be unset"))
	}
	if e.Source.Component != "" || e.Source.Host != "" {
		allErrs = append(allErrs, field.Invalid(field.NewPath("source"), "", "needs to be unset"))
	}
	return allErrs
}

// ValidateEventUpdate validates an update of an Event. For events.k8s.io/v1
// requests only the series may change, since an event records something
// that happened; core/v1 requests keep the legacy rules.
func ValidateEventUpdate(newE, oldE *corev1.Event, requestGroup string) field.ErrorList {
	allErrs := validateLegacyEvent(newE)
	if requestGroup != EventsGroup {
		return allErrs
	}
	allErrs = append(allErrs, validateObjectMetaUpdate(&newE.ObjectMeta, &oldE.ObjectMeta)...)
	if !reflect.DeepEqual(newE.Series, oldE.Series) {
		allErrs = append(allErrs, validateEventSeries(newE)...)
	}
	immutable := []struct {
		name     string
		new, old any
	}{
		{"involvedObject", newE.InvolvedObject, oldE.InvolvedObject},
		{"reason", newE.Reason, oldE.Reason},
		{"message", newE.Message, oldE.Message},
		{"source", newE.Source, oldE.Source},
		{"firstTimestamp", newE.FirstTimestamp, oldE.FirstTimestamp},
		{"lastTimestamp", newE.LastTimestamp, oldE.LastTimestamp},
		{"count", newE.Count, oldE.Count},
		{"type", newE.Type, oldE.Type},
		{"eventTime", newE.EventTime, oldE.EventTime},
		{"action", newE.Action, oldE.Action},
		{"related", newE.Related, oldE.Related},
		{"reportingController", newE.ReportingController, oldE.ReportingController},
		{"reportingInstance", newE.ReportingInstance, oldE.ReportingInstance},
	}
	for _, f := range immutable {
		allErrs = append(allErrs, validateImmutable(f.new, f.old, field.NewPath(f.name))...)
	}
	return allErrs
}

func validateEventSeries(e *corev1.Event) field.ErrorList {
	if e.Series == nil {
		return nil
	}
	var allErrs field.ErrorList
	// Single dotted path elements, as kube-apiserver reports them.
	if e.Series.Count < 2 {
		allErrs = append(allErrs, field.Invalid(field.NewPath("series.count"), "", "should be at least 2"))
	}
	if e.Series.LastObservedTime.IsZero() {
		allErrs = append(allErrs, field.Required(field.NewPath("series.lastObservedTime"), ""))
	}
	return allErrs
}

// validateLegacyEvent holds the checks every event passes, whatever the
// API version. Old-style events (no eventTime) only need a namespace that
// agrees with the involved object's; new-style ones also need their
// reporting fields, within length limits.
func validateLegacyEvent(e *corev1.Event) field.ErrorList {
	var allErrs field.ErrorList
	nsPath := field.NewPath("involvedObject", "namespace")
	const nsMismatch = "does not match event.namespace"
	if e.EventTime.IsZero() {
		if e.InvolvedObject.Namespace == "" {
			// Cluster-scoped objects: old clients post to "default".
			if e.Namespace != metav1.NamespaceNone && e.Namespace != metav1.NamespaceDefault {
				allErrs = append(allErrs, field.Invalid(nsPath, e.InvolvedObject.Namespace, nsMismatch))
			}
		} else if e.Namespace != e.InvolvedObject.Namespace {
			allErrs = append(allErrs, field.Invalid(nsPath, e.InvolvedObject.Namespace, nsMismatch))
		}
	} else {
		if e.InvolvedObject.Namespace == "" && e.Namespace != metav1.NamespaceDefault && e.Namespace != metav1.NamespaceSystem {
			allErrs = append(allErrs, field.Invalid(nsPath, e.InvolvedObject.Namespace, nsMismatch))
		}
		if e.ReportingController == "" {
			allErrs = append(allErrs, field.Required(field.NewPath("reportingController"), ""))
		}
		for _, msg := range content.IsLabelKey(e.ReportingController) {
			allErrs = append(allErrs, field.Invalid(field.NewPath("reportingController"), e.ReportingController, msg))
		}
		if e.ReportingInstance == "" {
			allErrs = append(allErrs, field.Required(field.NewPath("reportingInstance"), ""))
		}
		if len(e.ReportingInstance) > reportingInstanceLengthLimit {
			allErrs = append(allErrs, field.Invalid(field.NewPath("reportingInstance"), "", fmt.Sprintf("can have at most %v characters", reportingInstanceLengthLimit)))
		}
		if e.Action == "" {
			allErrs = append(allErrs, field.Required(field.NewPath("action"), ""))
		}
		if len(e.Action) > actionLengthLimit {
			allErrs = append(allErrs, field.Invalid(field.NewPath("action"), "", fmt.Sprintf("can have at most %v characters", actionLengthLimit)))
		}
		if e.Reason == "" {
			allErrs = append(allErrs, field.Required(field.NewPath("reason"), ""))
		}
		if len(e.Reason) > reasonLengthLimit {
			allErrs = append(allErrs, field.Invalid(field.NewPath("reason"), "", fmt.Sprintf("can have at most %v characters", reasonLengthLimit)))
		}
		if len(e.Message) > noteLengthLimit {
			allErrs = append(allErrs, field.Invalid(field.NewPath("message"), "", fmt.Sprintf("can have at most %v characters", noteLengthLimit)))
		}
	}
	for _, msg := range validation.IsDNS1123Subdomain(e.Namespace) {
		allErrs = append(allErrs, field.Invalid(field.NewPath("namespace"), e.Namespace, msg))
	}
	return allErrs
}
