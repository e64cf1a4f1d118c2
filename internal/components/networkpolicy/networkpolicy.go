// Package networkpolicy enforces networking.k8s.io/v1 NetworkPolicy on
// every node of kubeboot's pod network, in the node's own process, with
// nftables through sigs.k8s.io/knftables (kube-proxy's nftables library;
// no iptables or ipset). Each node writes one inet table for its own
// Pods: a verdict map from each isolated Pod's address to the chain of
// the policies that select it, a chain per policy and direction, and sets
// of the peers' addresses, rewritten whole in one transaction when the
// Pods, Namespaces or policies change (decisions.md, "NetworkPolicy").
//
// The server's part is the nodes' agents' right to read what they
// enforce (Component); the nodes' part is Enforcer.
package networkpolicy

import (
	"context"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/platform/nodejoin"
)

// ConditionType is the Node condition a node reports its enforcement in,
// as flannel reports the pod network's in NetworkUnavailable: False once
// the node enforces its Pods' policies, True (with the reason) when it
// cannot.
const ConditionType corev1.NodeConditionType = "NetworkPolicyUnavailable"

// The condition's reasons, and the events' (on the Node and on a policy).
const (
	ReasonEnforced          = "NetworkPolicyEnforced"
	ReasonNFTUnavailable    = "NFTablesUnavailable"
	ReasonSyncFailed        = "NetworkPolicySyncFailed"
	ReasonPolicyUnsupported = "NetworkPolicyUnsupported"
)

// Defaults of Node's intervals.
const (
	// DefaultMinSyncInterval batches the changes of a moment into one
	// transaction.
	DefaultMinSyncInterval = 100 * time.Millisecond
	// DefaultResyncInterval is how often a node checks, when nothing
	// changed, that its table and base chains are there, and writes them
	// again if another program deleted them.
	DefaultResyncInterval = time.Minute
)

// maxRetryInterval bounds the back-off after a failed transaction.
const maxRetryInterval = 30 * time.Second

// Node is a node whose own Pods' NetworkPolicies an Enforcer enforces.
type Node struct {
	// Name is the Node's name.
	Name string
	// Client is the node's agent's (nodejoin.AgentUser): it reads Pods,
	// Namespaces, NetworkPolicies and the cluster DNS's EndpointSlices, and
	// writes the Node's condition and events.
	Client kubernetes.Interface
	// MinSyncInterval and ResyncInterval default to DefaultMinSyncInterval
	// and DefaultResyncInterval.
	MinSyncInterval, ResyncInterval time.Duration
}

// User is the component's in-process user: it gives the nodes' agents
// their rights and holds them itself.
const User = "system:kubeboot:network-policy"

// rules are what a node reads to enforce its Pods' policies, and the
// events it records on its Node and on policies.
var rules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"pods", "namespaces"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{networkingv1.GroupName}, Resources: []string{"networkpolicies"}, Verbs: []string{"get", "list", "watch"}},
	// The cluster DNS's endpoints, which policies judge as CoreDNS's Pods.
	{APIGroups: []string{discoveryv1.GroupName}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
}

// Component is NetworkPolicy as a component of a server: the nodes'
// agents' rights. The server enforces nothing itself: it has no Pods but
// its node's, whose process enforces them.
type Component struct{}

// New returns the component.
func New() *Component { return &Component{} }

// Name implements controlplane.Component.
func (*Component) Name() string { return "network policy" }

// Complete implements controlplane.Component.
func (*Component) Complete(controlplane.Settings) (controlplane.Needs, error) {
	return controlplane.Needs{
		User: User,
		Grant: controlplane.GrantClusterRoleTo(User, []rbacv1.Subject{
			{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: User},
			{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: nodejoin.AgentsGroup},
		}, rules...),
		Allowed: authorizationv1.ResourceAttributes{Verb: "list", Group: networkingv1.GroupName, Resource: "networkpolicies"},
	}, nil
}

// Run implements controlplane.Component: the rights are given before it
// runs, and there is nothing else to do.
func (*Component) Run(ctx context.Context, _ *controlplane.Server) error {
	<-ctx.Done()
	return nil
}
