package api

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/kubeboot/kubeboot/internal/api/defaults"
)

// Served group versions, in the order kube-apiserver lists them.
var (
	CoreV1         = corev1.SchemeGroupVersion
	CoordinationV1 = coordinationv1.SchemeGroupVersion
	DiscoveryV1    = discoveryv1.SchemeGroupVersion
	EventsV1       = eventsv1.SchemeGroupVersion
	NetworkingV1   = networkingv1.SchemeGroupVersion
)

// Internal returns the hub version of a group.
func Internal(group string) schema.GroupVersion {
	return schema.GroupVersion{Group: group, Version: runtime.APIVersionInternal}
}

// servedKinds lists, per group version, the objects kubeboot stores; these
// are also registered as the group's internal version.
func servedKinds() map[schema.GroupVersion][]runtime.Object {
	return map[schema.GroupVersion][]runtime.Object{
		CoreV1: {
			&corev1.Namespace{}, &corev1.NamespaceList{},
			&corev1.Service{}, &corev1.ServiceList{},
			&corev1.Endpoints{}, &corev1.EndpointsList{},
			&corev1.ConfigMap{}, &corev1.ConfigMapList{},
			&corev1.Secret{}, &corev1.SecretList{},
			&corev1.Event{}, &corev1.EventList{},
			&corev1.ServiceAccount{}, &corev1.ServiceAccountList{},
		},
		CoordinationV1: {&coordinationv1.Lease{}, &coordinationv1.LeaseList{}},
		DiscoveryV1:    {&discoveryv1.EndpointSlice{}, &discoveryv1.EndpointSliceList{}},
		NetworkingV1: {
			&networkingv1.ServiceCIDR{}, &networkingv1.ServiceCIDRList{},
			&networkingv1.IPAddress{}, &networkingv1.IPAddressList{},
		},
	}
}

// NewScheme returns a scheme holding every served type, its hub version,
// defaulting, conversions and field label conversions. Each server builds
// its own: nothing here is package-level state.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	// External versions first, so that ObjectKinds lists the v1 kind first.
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(coordinationv1.AddToScheme(s))
	utilruntime.Must(discoveryv1.AddToScheme(s))
	utilruntime.Must(eventsv1.AddToScheme(s))
	utilruntime.Must(networkingv1.AddToScheme(s))

	for gv, objs := range servedKinds() {
		s.AddKnownTypes(Internal(gv.Group), objs...)
	}
	// The node port allocation bitmap is stored like kube-apiserver's, at
	// /registry/ranges/servicenodeports, though not served.
	s.AddKnownTypes(Internal(CoreV1.Group), &corev1.RangeAllocation{})
	// events.k8s.io shares storage with core/v1 Events: its hub is the core
	// Event, as in kube-apiserver.
	s.AddKnownTypes(Internal(EventsV1.Group), &corev1.Event{}, &corev1.EventList{})

	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	s.AddUnversionedTypes(unversioned,
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{},
		&metav1.APIGroup{}, &metav1.APIResourceList{},
	)

	utilruntime.Must(s.SetVersionPriority(CoreV1))
	utilruntime.Must(s.SetVersionPriority(CoordinationV1))
	utilruntime.Must(s.SetVersionPriority(DiscoveryV1))
	utilruntime.Must(s.SetVersionPriority(EventsV1))
	utilruntime.Must(s.SetVersionPriority(NetworkingV1))

	utilruntime.Must(addEventConversions(s))
	utilruntime.Must(addFieldLabelConversions(s))
	defaults.Register(s)
	return s
}

// NewCodecs returns the codec factory for a scheme built by NewScheme.
func NewCodecs(s *runtime.Scheme) serializer.CodecFactory {
	return serializer.NewCodecFactory(s)
}
