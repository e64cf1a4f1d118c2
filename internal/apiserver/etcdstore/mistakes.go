package etcdstore

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/storage"
)

// clientMistakes answers with 400 Bad Request two client mistakes that
// the etcd store and the generic registry report with untyped errors,
// which the handlers would answer with 500 Internal Server Error:
//   - a create carrying a resourceVersion;
//   - a patch that cannot be applied to the stored object: an unknown
//     strategic merge patch directive or one of the wrong type, or an
//     apply configuration that does not fit the object's schema. The
//     handlers apply patches inside the update's tryUpdate and map only
//     some of the patch libraries' errors to 4xx (kubernetes/kubernetes
//     #122480); the rest come back as plain errors.
type clientMistakes struct{ storage.Interface }

func (s clientMistakes) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	err := s.Interface.Create(ctx, key, obj, out, ttl)
	if errors.Is(err, storage.ErrResourceVersionSetOnCreate) {
		return apierrors.NewBadRequest(err.Error())
	}
	return err
}

// GuaranteedUpdate, for a patch, answers an error without an API status
// from tryUpdate as the patch's fault. Everything tryUpdate does after
// applying the patch (validation, admission, allocations) reports typed
// errors, with one exception: the registry's own signal that an update
// removed the last finalizer of an object being deleted. So errors on an
// object being deleted pass through unchanged.
//
// A dry-run patch does not come through here (the registry runs tryUpdate
// itself), so it still answers such a patch with a 500.
func (s clientMistakes) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	if info, ok := request.RequestInfoFrom(ctx); !ok || info.Verb != "patch" {
		return s.Interface.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, tryUpdate, cachedExistingObject)
	}
	patch := func(existing runtime.Object, res storage.ResponseMeta) (runtime.Object, *uint64, error) {
		obj, ttl, err := tryUpdate(existing, res)
		if err == nil {
			return obj, ttl, err
		}
		var status apierrors.APIStatus
		if errors.As(err, &status) || beingDeleted(existing) {
			return obj, ttl, err
		}
		return obj, ttl, apierrors.NewBadRequest(err.Error())
	}
	return s.Interface.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, patch, cachedExistingObject)
}

func beingDeleted(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	return err != nil || m.GetDeletionTimestamp() != nil
}
