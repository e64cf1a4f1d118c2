package simulatednodes

import (
	"context"
	"fmt"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/controlplane"
)

// Names of User's ClusterRole and binding, and of its FlowSchema (which
// a colon may not be in).
const (
	accessName     = "kubeboot:simulated-nodes"
	flowSchemaName = "kubeboot-simulated-nodes"
)

// Access gives User what kwok's controller is given in a kwok cluster:
// the ClusterRole of kwok's own manifests (read nodes, write node and Pod
// status, delete Pods, renew node leases, record events), bound to User,
// and a FlowSchema that puts its requests at the node-high priority
// level, where kube-apiserver's default FlowSchemas put kubelets'.
// client must be allowed to grant that (the apiserver's loopback client).
func Access(ctx context.Context, client kubernetes.Interface) error {
	grant := controlplane.GrantClusterRole(accessName, User,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes/status", "pods/status"}, Verbs: []string{"patch", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "delete", "patch", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "patch", "update"}},
	)
	if err := grant(ctx, client); err != nil {
		return fmt.Errorf("simulated nodes' access: %w", err)
	}
	all := []string{rbacv1.ResourceAll}
	flow := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: flowSchemaName},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "node-high"},
			// Before kube-apiserver's "system-nodes" (500), which matches
			// the group system:nodes.
			MatchingPrecedence:  450,
			DistinguisherMethod: &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: User}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
					Verbs: all, APIGroups: all, Resources: all, ClusterScope: true, Namespaces: []string{flowcontrolv1.NamespaceEvery}}},
			}},
		},
	}
	if _, err := client.FlowcontrolV1().FlowSchemas().Create(ctx, flow, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("simulated nodes' access: %w", err)
	}
	return nil
}
