package printers

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Events returns the Table for core/v1 events (*corev1.Event and
// *corev1.EventList); events.k8s.io/v1 requests are served from the same
// objects and use it too. Columns: Last Seen, Type, Reason, Object, Message,
// and the wide Subobject, Source, First Seen, Count and Name.
func Events() *Table {
	doc := corev1.Event{}.SwaggerDoc()
	return newTable("events", []metav1.TableColumnDefinition{
		column("Last Seen", doc["lastTimestamp"]),
		column("Type", doc["type"]),
		column("Reason", doc["reason"]),
		column("Object", doc["involvedObject"]),
		wideColumn("Subobject", corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]),
		wideColumn("Source", doc["source"]),
		column("Message", doc["message"]),
		wideColumn("First Seen", doc["firstTimestamp"]),
		wideColumn("Count", doc["count"]),
		func() metav1.TableColumnDefinition {
			c := nameColumn()
			c.Priority = 1
			return c
		}(),
	}, eventCells)
}

// eventCells prints one event. Events written through events.k8s.io/v1 carry
// eventTime and series instead of the timestamps and count of core/v1, so
// those are used when the core/v1 fields are unset.
func eventCells(e *corev1.Event, now time.Time) []interface{} {
	firstSeen := age(e.FirstTimestamp, now)
	if e.FirstTimestamp.IsZero() {
		firstSeen = microAge(e.EventTime, now)
	}
	lastSeen := age(e.LastTimestamp, now)
	if e.LastTimestamp.IsZero() {
		lastSeen = firstSeen
	}
	count := e.Count
	if e.Series != nil {
		lastSeen = microAge(e.Series.LastObservedTime, now)
		count = e.Series.Count
	} else if count == 0 {
		// Singleton events written through events.k8s.io/v1 have no count.
		count = 1
	}

	object := strings.ToLower(e.InvolvedObject.Kind)
	if e.InvolvedObject.Name != "" {
		object += "/" + e.InvolvedObject.Name
	}

	return []interface{}{
		lastSeen,
		e.Type,
		e.Reason,
		object,
		e.InvolvedObject.FieldPath,
		eventSource(e),
		strings.TrimSpace(e.Message),
		firstSeen,
		int64(count),
		e.Name,
	}
}

// eventSource renders "component, host", falling back to the reporting
// controller and instance, and dropping the host part when it is empty.
func eventSource(e *corev1.Event) string {
	component := e.Source.Component
	if component == "" {
		component = e.ReportingController
	}
	host := e.Source.Host
	if host == "" {
		host = e.ReportingInstance
	}
	if host == "" {
		return component
	}
	return component + ", " + host
}
