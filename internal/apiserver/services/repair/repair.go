package repair

import (
	"context"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/runtime"
)

// Event reasons of the repair loops, as kube-apiserver's.
const (
	ReasonClusterIPNotValid         = "ClusterIPNotValid"
	ReasonClusterIPNotAllocated     = "ClusterIPNotAllocated"
	ReasonClusterIPAlreadyAllocated = "ClusterIPAlreadyAllocated"
	ReasonClusterIPOutOfRange       = "ClusterIPOutOfRange"
	ReasonServiceCIDRFull           = "ServiceCIDRFull"
	ReasonPortNotAllocated          = "PortNotAllocated"
	ReasonPortAlreadyAllocated      = "PortAlreadyAllocated"
	ReasonPortOutOfRange            = "PortOutOfRange"
	ReasonPortRangeFull             = "PortRangeFull"
	ReasonUnknownError              = "UnknownError"
)

// LeakSightings is how many repair passes must see an allocation without a
// Service before it is freed: an allocation for a create still in flight
// is seen at most once or twice.
const LeakSightings = 3

// Lister lists objects of a registry in-process (the generic store's
// List), without the cost of serializing them.
type Lister interface {
	List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error)
}
