package simulatednodes

import (
	"strings"
	"testing"

	"sigs.k8s.io/kwok/pkg/apis/internalversion"
)

// TestStages checks the edits to kwok's stages took: were a kwok upgrade
// to change the lines they edit, stages fails rather than leave kwok's.
func TestStages(t *testing.T) {
	byRef, err := stages(NewOptions())
	if err != nil {
		t.Fatal(err)
	}
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
