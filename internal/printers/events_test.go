package printers

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEventCells(t *testing.T) {
	micro := func(d time.Duration) metav1.MicroTime { return metav1.NewMicroTime(testNow().Add(-d)) }
	tests := []struct {
		name   string
		mutate func(*corev1.Event)
		want   []interface{}
	}{{
		name: "no timestamps, as created by kubectl",
		want: []interface{}{"<unknown>", "Normal", "Probe", "service/web", "", "", "hello", "<unknown>", int64(1), "e1"},
	}, {
		name: "core/v1 timestamps and count",
		mutate: func(e *corev1.Event) {
			e.FirstTimestamp, e.LastTimestamp, e.Count = ago(10*time.Minute), ago(30*s), 7
		},
		want: []interface{}{"30s", "Normal", "Probe", "service/web", "", "", "hello", "10m", int64(7), "e1"},
	}, {
		name:   "first timestamp only: last seen falls back to it",
		mutate: func(e *corev1.Event) { e.FirstTimestamp = ago(4 * s) },
		want:   []interface{}{"4s", "Normal", "Probe", "service/web", "", "", "hello", "4s", int64(1), "e1"},
	}, {
		name:   "events.k8s.io singleton: eventTime",
		mutate: func(e *corev1.Event) { e.EventTime = micro(8 * s) },
		want:   []interface{}{"8s", "Normal", "Probe", "service/web", "", "", "hello", "8s", int64(1), "e1"},
	}, {
		name: "events.k8s.io series",
		mutate: func(e *corev1.Event) {
			e.EventTime = micro(5 * time.Minute)
			e.Count = 2
			e.Series = &corev1.EventSeries{Count: 12, LastObservedTime: micro(9 * s)}
		},
		want: []interface{}{"9s", "Normal", "Probe", "service/web", "", "", "hello", "5m", int64(12), "e1"},
	}, {
		name: "source component and host, field path, trimmed message",
		mutate: func(e *corev1.Event) {
			e.Source = corev1.EventSource{Component: "kubelet", Host: "node-1"}
			e.InvolvedObject = corev1.ObjectReference{Kind: "Pod", Name: "p", FieldPath: "spec.containers{app}"}
			e.Message = "  pulled image\n"
			e.Type = corev1.EventTypeWarning
		},
		want: []interface{}{"<unknown>", "Warning", "Probe", "pod/p", "spec.containers{app}", "kubelet, node-1", "pulled image", "<unknown>", int64(1), "e1"},
	}, {
		name: "source falls back to the reporting controller and instance",
		mutate: func(e *corev1.Event) {
			e.ReportingController, e.ReportingInstance = "example.com/ctrl", "ctrl-0"
		},
		want: []interface{}{"<unknown>", "Normal", "Probe", "service/web", "", "example.com/ctrl, ctrl-0", "hello", "<unknown>", int64(1), "e1"},
	}, {
		name:   "component without host",
		mutate: func(e *corev1.Event) { e.Source.Component = "scheduler" },
		want:   []interface{}{"<unknown>", "Normal", "Probe", "service/web", "", "scheduler", "hello", "<unknown>", int64(1), "e1"},
	}, {
		name:   "object without a name prints only the kind",
		mutate: func(e *corev1.Event) { e.InvolvedObject = corev1.ObjectReference{Kind: "Node"} },
		want:   []interface{}{"<unknown>", "Normal", "Probe", "node", "", "", "hello", "<unknown>", int64(1), "e1"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := probeEvent(time.Hour)
			if tc.mutate != nil {
				tc.mutate(e)
			}
			if got := cells(t, Events(), e); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("cells\n got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}
