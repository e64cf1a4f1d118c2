package simulatednodes

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kwok/pkg/apis/internalversion"
	"sigs.k8s.io/kwok/pkg/utils/gotpl"
)

// statusTemplates are the status templates of the stages byRef, by stage.
func statusTemplates(byRef map[internalversion.StageResourceRef][]*internalversion.Stage) map[string]string {
	templates := map[string]string{}
	for _, list := range byRef {
		for _, s := range list {
			for _, step := range s.Spec.Steps {
				if p := step.Patch; p != nil && p.Subresource == "status" {
					templates[s.Name] += p.Template
				}
			}
		}
	}
	return templates
}

// TestStages checks the edits to kwok's stages took: were a kwok upgrade
// to change the lines they edit, stages fails rather than leave kwok's.
func TestStages(t *testing.T) {
	byRef, err := stages(NewOptions())
	if err != nil {
		t.Fatal(err)
	}
	templates := statusTemplates(byRef)
	for stage, want := range map[string]string{"node-initialize": noKubeProxyVersion, "pod-complete": completedConditions} {
		if !strings.Contains(templates[stage], want) {
			t.Errorf("stage %s: status template lacks %q:\n%s", stage, want, templates[stage])
		}
	}
	if strings.Contains(templates["node-initialize"], kwokKubeProxyVersion) {
		t.Errorf("stage node-initialize still reports kwok's version as kube-proxy's")
	}
	var heartbeat *internalversion.Stage
	for _, list := range byRef {
		for _, s := range list {
			if s.Name == "node-heartbeat-with-lease" {
				heartbeat = s
			}
		}
	}
	if heartbeat == nil || heartbeat.Spec.Delay == nil || heartbeat.Spec.Delay.DurationMilliseconds == nil || heartbeat.Spec.Delay.JitterDurationMilliseconds == nil {
		t.Fatalf("no node-heartbeat-with-lease stage with a delay: %+v", heartbeat)
	}
	// The kubelet's --node-status-report-frequency, 5m, within its
	// --node-status-update-frequency, 10s.
	if d, j := *heartbeat.Spec.Delay.DurationMilliseconds, *heartbeat.Spec.Delay.JitterDurationMilliseconds; d != 300_000 || j != 310_000 {
		t.Errorf("node status every %d to %d ms, want the kubelet's 300000 to 310000", d, j)
	}
}

func TestEditStatus(t *testing.T) {
	withStatus := func(template string) *internalversion.Stage {
		s := &internalversion.Stage{}
		s.Name = "test"
		s.Spec.Steps = []internalversion.StageStep{{Patch: &internalversion.StagePatch{Subresource: "status", Root: "status", Template: template}}}
		return s
	}
	tests := []struct {
		name     string
		stage    *internalversion.Stage
		old, new string
		want     string // the template after; empty: an error
	}{
		{"adds at the end", withStatus("a: 1\n"), "", "b: 2\n", "a: 1\nb: 2\n"},
		{"replaces a line", withStatus("a: 1\nb: 2\n"), "a: 1", "a: 3", "a: 3\nb: 2\n"},
		{"refuses a missing line", withStatus("a: 1\n"), "c: 1", "c: 2", ""},
		{"refuses a stage without a status patch", &internalversion.Stage{}, "", "b: 2\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := editStatus(tt.stage, tt.old, tt.new)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("editStatus succeeded, want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.stage.Spec.Steps[0].Patch.Template; got != tt.want {
				t.Errorf("template %q, want %q", got, tt.want)
			}
		})
	}
}

// TestPodReadyAtBinding renders pod-ready's status for a bound Pod twice,
// as kwok does when it plays the stage again on a stale copy: the second
// status must be the first, so that the API server has nothing to write.
// A Pod bound without the scheduler keeps the time of the play.
func TestPodReadyAtBinding(t *testing.T) {
	byRef, err := stages(NewOptions())
	if err != nil {
		t.Fatal(err)
	}
	template := statusTemplates(byRef)["pod-ready"]
	if template == "" {
		t.Fatal("no pod-ready status template")
	}
	renderer := gotpl.NewRenderer(gotpl.FuncMap{
		"NodeIPsWith": func(string) []string { return []string{"10.0.0.1"} },
		"PodIPsWith":  func(string, bool, string, string, string) []string { return []string{"10.244.0.5"} },
	})
	bound := metav1.NewTime(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC))
	pod := func(conditions ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u"},
			Spec:       corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
			Status:     corev1.PodStatus{Phase: corev1.PodPending, Conditions: conditions},
		}
	}
	render := func(p *corev1.Pod) corev1.PodStatus {
		t.Helper()
		data, err := renderer.ToJSON(template, p)
		if err != nil {
			t.Fatal(err)
		}
		var status corev1.PodStatus
		if err := json.Unmarshal(data, &status); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		return status
	}

	scheduled := pod(corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: bound})
	first := render(scheduled)
	time.Sleep(1100 * time.Millisecond) // past the second the API server keeps
	if again := render(scheduled); !reflect.DeepEqual(again, first) {
		t.Errorf("pod-ready played again wrote another status:\n%+v\nfirst:\n%+v", again, first)
	}
	if first.StartTime == nil || !first.StartTime.Equal(&bound) || len(first.ContainerStatuses) != 1 ||
		first.ContainerStatuses[0].State.Running == nil || !first.ContainerStatuses[0].State.Running.StartedAt.Equal(&bound) {
		t.Errorf("start time %v, containers %+v: want the binding's %v", first.StartTime, first.ContainerStatuses, bound)
	}
	for _, c := range first.Conditions {
		if !c.LastTransitionTime.Equal(&bound) {
			t.Errorf("condition %s changed at %v, want the binding's %v", c.Type, c.LastTransitionTime, bound)
		}
	}

	began := time.Now().Truncate(time.Second)
	unscheduled := render(pod())
	if unscheduled.StartTime == nil || unscheduled.StartTime.Before(&metav1.Time{Time: began}) {
		t.Errorf("a Pod bound without the scheduler started at %v, want the play's time (from %v)", unscheduled.StartTime, began)
	}
}

// kwok's pools carry the simulated kubelets' load at the latency budget,
// and never shrink below kwok's own sizes.
func TestWorkers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		perSecond float64
		least     int
		want      uint
	}{
		{"5,000 nodes renewing a 40 s lease every 10 s", 500, 8, 250},
		{"200 nodes' leases", 20, 8, 10},
		{"10 nodes' leases: kwok's least", 1, 8, 8},
		{"a fraction rounds up", 2.1, 1, 2},
		{"Pod starts", podStartRate, 16, 100},
	} {
		if got := workers(tc.perSecond, tc.least); got != tc.want {
			t.Errorf("%s: workers(%v, %d) = %d, want %d", tc.name, tc.perSecond, tc.least, got, tc.want)
		}
	}
}
