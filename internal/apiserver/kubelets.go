package apiserver

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/registry/rest"
	kubeletclient "k8s.io/kubernetes/pkg/kubelet/client"

	"github.com/kubeboot/kubeboot/internal/platform/simulated"
)

// simulatedNodeKubelets is how the Pod and node registries reach a
// node's kubelet (logs, exec, attach, port-forward, the node proxy), but
// for a simulated node, which has none: the request fails at once with a
// clear error instead of dialling an address nothing serves.
type simulatedNodeKubelets struct {
	kubeletclient.ConnectionInfoGetter
	nodes rest.Getter
}

// GetConnectionInfo implements kubeletclient.ConnectionInfoGetter.
func (k simulatedNodeKubelets) GetConnectionInfo(ctx context.Context, name types.NodeName) (*kubeletclient.ConnectionInfo, error) {
	if obj, err := k.nodes.Get(ctx, string(name), &metav1.GetOptions{}); err == nil {
		if m, err := meta.Accessor(obj); err == nil && simulated.Node(m.GetAnnotations()) {
			return nil, apierrors.NewBadRequest(fmt.Sprintf(
				"node %q is simulated: it has no kubelet to serve logs, exec, attach, port-forward or proxy requests", name))
		}
	}
	return k.ConnectionInfoGetter.GetConnectionInfo(ctx, name)
}
