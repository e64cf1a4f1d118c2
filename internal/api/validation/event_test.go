package validation

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var eventNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// legacyEvent is an event as client-go's old recorder posts it to core/v1.
func legacyEvent(mutate func(*corev1.Event)) *corev1.Event {
	e := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "web.17f", Namespace: "default", ResourceVersion: "1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"},
		Reason:         "Started",
		Message:        "Started container web",
		Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp: metav1.NewTime(eventNow),
		LastTimestamp:  metav1.NewTime(eventNow),
		Count:          1,
		Type:           corev1.EventTypeNormal,
	}
	if mutate != nil {
		mutate(e)
	}
	return e
}

// newEvent is an events.k8s.io/v1 event, converted to core/v1.
func newEvent(mutate func(*corev1.Event)) *corev1.Event {
	e := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "web.17f", Namespace: "default", ResourceVersion: "1"},
		InvolvedObject:      corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"},
		Reason:              "Started",
		Message:             "Started container web",
		Type:                corev1.EventTypeNormal,
		EventTime:           metav1.NewMicroTime(eventNow),
		Action:              "Start",
		ReportingController: "kubelet",
		ReportingInstance:   "kubelet-node-1",
	}
	if mutate != nil {
		mutate(e)
	}
	return e
}

func TestValidateEvent(t *testing.T) {
	tests := []struct {
		name  string
		event *corev1.Event
		group string
		want  []string
	}{
		{name: "legacy event, core", event: legacyEvent(nil)},
		{name: "cluster-scoped object, event in default", event: legacyEvent(func(e *corev1.Event) {
			e.InvolvedObject = corev1.ObjectReference{Kind: "Node", Name: "node-1"}
		})},
		{name: "namespace mismatch", event: legacyEvent(func(e *corev1.Event) { e.InvolvedObject.Namespace = "other" }),
			want: []string{`involvedObject.namespace: Invalid value: "other": does not match event.namespace`}},
		{name: "core requests skip the strict checks", event: legacyEvent(func(e *corev1.Event) { e.Type = "Info" })},
		{name: "new-style event, core", event: newEvent(nil)},
		{name: "new-style event through core needs reporting fields", event: newEvent(func(e *corev1.Event) {
			e.ReportingController, e.ReportingInstance, e.Action = "", "", ""
			e.Reason = strings.Repeat("r", 129)
			e.Message = strings.Repeat("m", 1025)
		}), want: []string{
			`reportingController: Required value`,
			`reportingController: Invalid value: "": name part must be non-empty`,
			`reportingController: Invalid value: "": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
			`reportingInstance: Required value`,
			`action: Required value`,
			`reason: Invalid value: "": can have at most 128 characters`,
			`message: Invalid value: "": can have at most 1024 characters`,
		}},
		{name: "events.k8s.io event", event: newEvent(nil), group: EventsGroup},
		{name: "events.k8s.io event for a cluster-scoped object", event: newEvent(func(e *corev1.Event) {
			e.InvolvedObject = corev1.ObjectReference{Kind: "Node", Name: "node-1"}
		}), group: EventsGroup},
		{name: "events.k8s.io rejects old-style events", event: legacyEvent(nil), group: EventsGroup, want: []string{
			`eventTime: Required value`,
			`firstTimestamp: Invalid value: "": needs to be unset`,
			`lastTimestamp: Invalid value: "": needs to be unset`,
			`count: Invalid value: "": needs to be unset`,
			`source: Invalid value: "": needs to be unset`,
		}},
		{name: "events.k8s.io bad type, series and name", event: newEvent(func(e *corev1.Event) {
			e.Name, e.Type = "Web", "Info"
			e.Series = &corev1.EventSeries{Count: 1}
		}), group: EventsGroup, want: []string{
			`metadata.name: Invalid value: "Web": ` + dns1123SubdomainMsg,
			`series.count: Invalid value: "": should be at least 2`,
			`series.lastObservedTime: Required value`,
			`type: Invalid value: "": has invalid value: Info`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateEvent(tc.event, tc.group), tc.want)
		})
	}
}

func TestValidateEventUpdate(t *testing.T) {
	tests := []struct {
		name   string
		old    *corev1.Event
		mutate func(*corev1.Event)
		group  string
		want   []string
	}{
		{name: "legacy count bump", old: legacyEvent(nil), mutate: func(e *corev1.Event) {
			e.Count, e.LastTimestamp = 2, metav1.NewTime(eventNow.Add(time.Minute))
		}},
		{name: "core may change the message", old: newEvent(nil), mutate: func(e *corev1.Event) { e.Message = "other" }},
		{name: "events.k8s.io series update", old: newEvent(nil), group: EventsGroup, mutate: func(e *corev1.Event) {
			e.Series = &corev1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(eventNow.Add(time.Minute))}
		}},
		{name: "events.k8s.io fields are fixed", old: newEvent(nil), group: EventsGroup, mutate: func(e *corev1.Event) {
			e.Message, e.Action = "other", "Stop"
		}, want: []string{
			`message: Invalid value: "other": field is immutable`,
			`action: Invalid value: "Stop": field is immutable`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.old.DeepCopy()
			tc.mutate(e)
			checkErrors(t, ValidateEventUpdate(e, tc.old, tc.group), tc.want)
		})
	}
}
