package apiservices

import (
	"slices"
	"testing"

	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// registrar records what is registered.
type registrar struct {
	onStart []*apiregistrationv1.APIService
}

func (r *registrar) AddAPIServiceToSyncOnStart(s *apiregistrationv1.APIService) {
	r.onStart = append(r.onStart, s)
}
func (r *registrar) AddAPIServiceToSync(*apiregistrationv1.APIService) {}
func (r *registrar) RemoveAPIServiceToSync(string)                     {}

// TestRegisterServed registers an APIService for each served group
// version the paths list, with kube-apiserver's priorities, and none for
// the aggregator's own group, paths that are no group version, or a group
// version kube-apiserver has no priority for.
func TestRegisterServed(t *testing.T) {
	var r registrar
	names := RegisterServed(&r, []string{
		"/api", "/api/v1", "/apis", "/apis/apps", "/apis/apps/v1", "/apis/batch/v1", "/apis/admissionregistration.k8s.io/v1",
		"/apis/apiregistration.k8s.io/v1", "/apis/example.com/v1", "/healthz", "/openapi/v2", "/version",
	})
	want := []string{"v1.", "v1.apps", "v1.batch", "v1.admissionregistration.k8s.io"}
	if !slices.Equal(names, want) {
		t.Errorf("registered %v, want %v", names, want)
	}
	for _, tc := range []struct {
		name            string
		group           string
		groupPriority   int32
		versionPriority int32
	}{
		{"v1.", "", 18000, 1},
		{"v1.apps", "apps", 17800, 15},
		{"v1.admissionregistration.k8s.io", "admissionregistration.k8s.io", 16700, 15},
	} {
		i := slices.IndexFunc(r.onStart, func(s *apiregistrationv1.APIService) bool { return s.Name == tc.name })
		if i < 0 {
			t.Errorf("%s not registered", tc.name)
			continue
		}
		s := r.onStart[i].Spec
		if s.Group != tc.group || s.GroupPriorityMinimum != tc.groupPriority || s.VersionPriority != tc.versionPriority || s.Service != nil {
			t.Errorf("%s: %+v, want local, group %q, priorities %d/%d", tc.name, s, tc.group, tc.groupPriority, tc.versionPriority)
		}
	}
}
