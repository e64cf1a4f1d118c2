package apiserver

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/kubeboot/kubeboot/internal/api"
	"github.com/kubeboot/kubeboot/internal/registry/configmap"
	"github.com/kubeboot/kubeboot/internal/registry/endpoints"
	"github.com/kubeboot/kubeboot/internal/registry/endpointslice"
	"github.com/kubeboot/kubeboot/internal/registry/event"
	"github.com/kubeboot/kubeboot/internal/registry/lease"
	"github.com/kubeboot/kubeboot/internal/registry/namespace"
	"github.com/kubeboot/kubeboot/internal/registry/secret"
	"github.com/kubeboot/kubeboot/internal/registry/service"
	"github.com/kubeboot/kubeboot/internal/registry/serviceaccount"
	"github.com/kubeboot/kubeboot/internal/registry/servicecidr"
)

// resources holds the storage of every served resource, by group version
// and resource path ("services/status").
type resources map[string]map[string]rest.Storage

// newStorages builds every resource's storage on opts; Services allocate
// through alloc.
func newStorages(opts generic.RESTOptionsGetter, scheme *runtime.Scheme, eventTTL time.Duration, ipAddresses rest.Storage, alloc *service.Allocators) (map[string]resources, error) {
	var errs []error
	must := func(s rest.Storage, err error) rest.Storage {
		if err != nil {
			errs = append(errs, err)
		}
		return s
	}
	ns, err := namespace.NewStorage(opts, scheme)
	if err != nil {
		return nil, err
	}
	cidrs, err := servicecidr.NewStorage(opts, scheme)
	if err != nil {
		ns.Namespace.Destroy()
		return nil, err
	}
	services, err := service.NewStorage(opts, scheme, alloc)
	if err != nil {
		ns.Namespace.Destroy()
		cidrs.ServiceCIDR.Destroy()
		return nil, err
	}
	groups := map[string]resources{
		"": {"v1": {
			"namespaces":          ns.Namespace,
			"namespaces/status":   ns.Status,
			"namespaces/finalize": ns.Finalize,
			"services":            services.Service,
			"services/status":     services.Status,
			"configmaps":          must(configmap.NewREST(opts, scheme)),
			"secrets":             must(secret.NewREST(opts, scheme)),
			"serviceaccounts":     must(serviceaccount.NewREST(opts, scheme)),
			"endpoints":           must(endpoints.NewREST(opts, scheme)),
			"events":              must(event.NewREST(opts, scheme, "", eventTTL)),
		}},
		api.CoordinationV1.Group: {"v1": {"leases": must(lease.NewREST(opts, scheme))}},
		api.DiscoveryV1.Group:    {"v1": {"endpointslices": must(endpointslice.NewREST(opts, scheme))}},
		api.EventsV1.Group:       {"v1": {"events": must(event.NewREST(opts, scheme, api.EventsV1.Group, eventTTL))}},
		api.NetworkingV1.Group: {"v1": {
			"servicecidrs":        cidrs.ServiceCIDR,
			"servicecidrs/status": cidrs.Status,
			"ipaddresses":         ipAddresses,
		}},
	}
	if len(errs) > 0 {
		destroyStorages(groups)
		return nil, fmt.Errorf("creating storage: %w", errors.Join(errs...))
	}
	return groups, nil
}

// destroyStorages stops the watch caches and etcd stores of groups; it is
// used when the server fails before taking ownership of them.
func destroyStorages(groups map[string]resources) {
	for _, versions := range groups {
		for _, res := range versions {
			for _, s := range res {
				if s != nil {
					s.Destroy()
				}
			}
		}
	}
}

// installAPIs serves every group: the legacy core group under /api, the
// others under /apis.
func installAPIs(s *genericapiserver.GenericAPIServer, scheme *runtime.Scheme, codecs serializer.CodecFactory, groups map[string]resources) error {
	paramCodec := runtime.NewParameterCodec(scheme)
	var named []*genericapiserver.APIGroupInfo
	for _, group := range slices.Sorted(maps.Keys(groups)) {
		versions := groups[group]
		info := genericapiserver.NewDefaultAPIGroupInfo(group, scheme, paramCodec, codecs)
		for version, res := range versions {
			info.VersionedResourcesStorageMap[version] = res
		}
		if group == "" {
			if err := s.InstallLegacyAPIGroup(genericapiserver.DefaultLegacyAPIPrefix, &info); err != nil {
				return fmt.Errorf("installing core/v1: %w", err)
			}
			continue
		}
		named = append(named, &info)
	}
	if err := s.InstallAPIGroups(named...); err != nil {
		return fmt.Errorf("installing API groups: %w", err)
	}
	return nil
}
