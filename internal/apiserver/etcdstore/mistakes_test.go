package etcdstore

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/storage"
)

// updatingStore runs tryUpdate once on existing, as the etcd store does.
type updatingStore struct {
	storage.Interface
	existing runtime.Object
}

func (s updatingStore) GuaranteedUpdate(_ context.Context, _ string, _ runtime.Object, _ bool,
	_ *storage.Preconditions, tryUpdate storage.UpdateFunc, _ runtime.Object) error {
	_, _, err := tryUpdate(s.existing, storage.ResponseMeta{})
	return err
}

func TestClientMistakesPatchErrors(t *testing.T) {
	plain := errors.New("unknown patch type: frobnicate in map: map[$patch:frobnicate]")
	conflict := apierrors.NewConflict(corev1.Resource("services"), "web", errors.New("taken"))
	live := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}
	now := metav1.Now()
	deleting := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", DeletionTimestamp: &now, Finalizers: []string{"x"}}}
	for _, tc := range []struct {
		name       string
		verb       string // "" for no request info
		existing   runtime.Object
		err        error
		badRequest bool // else the error must come back unchanged
	}{
		{"plain error in a patch", "patch", live, plain, true},
		{"plain error in a patch creating the object", "patch", &corev1.ConfigMap{}, plain, true},
		{"typed error in a patch", "patch", live, conflict, false},
		{"plain error in a patch of an object being deleted", "patch", deleting, plain, false},
		{"plain error in an update", "update", live, plain, false},
		{"plain error outside a request", "", live, plain, false},
		{"success", "patch", live, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.verb != "" {
				ctx = request.WithRequestInfo(ctx, &request.RequestInfo{IsResourceRequest: true, Verb: tc.verb})
			}
			s := clientMistakes{updatingStore{existing: tc.existing}}
			err := s.GuaranteedUpdate(ctx, "/k", &corev1.ConfigMap{}, false, nil,
				func(runtime.Object, storage.ResponseMeta) (runtime.Object, *uint64, error) { return nil, nil, tc.err }, nil)
			switch {
			case tc.badRequest:
				if !apierrors.IsBadRequest(err) || err.Error() != tc.err.Error() {
					t.Errorf("got %v, want a BadRequest with the message %q", err, tc.err)
				}
			case err != tc.err:
				t.Errorf("got %v, want %v unchanged", err, tc.err)
			}
		})
	}
}
