// Package nodejoin admits nodes to the cluster with their names protected,
// k3s's node password idea on the kubelet's TLS bootstrap: the first time
// a node joins, its name is bound to a password only that host keeps;
// every later join must present it. Each join gets a bootstrap token of
// its own that names the node (NodeAnnotation), and kubeletclient
// approves the kubelet's client certificate request made with it for that
// node's name alone, so no other host can take over an existing node's
// name, and no token can be turned into another node's credentials.
package nodejoin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	admissionapply "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	rbacapply "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/kubernetes"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	bootstraptokenv1 "k8s.io/kubernetes/cmd/kubeadm/app/apis/bootstraptoken/v1"
	kubeadmconstants "k8s.io/kubernetes/cmd/kubeadm/app/constants"
)

const (
	// Group is the group of the bootstrap tokens Admit issues: it may ask
	// for a node client certificate, which only kubeletclient approves
	// (kubeadm's group, which kube-controller-manager approves for any
	// node name, is not used).
	Group = "system:bootstrappers:kubeboot:nodes"
	// NodeAnnotation, on a bootstrap token's Secret, names the node the
	// token is for.
	NodeAnnotation = "nodejoin.kubeboot.io/node"
	// PasswordSecretType is the type of the Secrets in kube-system that
	// bind node names to their passwords' hashes.
	PasswordSecretType corev1.SecretType = "kubeboot.io/node-password"
	// passwordSecretSuffix ends a password Secret's name, k3s's
	// <node>.node-password.k3s.
	passwordSecretSuffix = ".node-password.kubeboot"
	// passwordHashKey holds the hex SHA-256 of the password: a random
	// secret of 256 bits needs no salt or stretching.
	passwordHashKey = "hash"
	// tokenTTL is a bootstrap token's lifetime: it serves one TLS
	// bootstrap, and kube-controller-manager's token cleaner deletes it
	// once expired.
	tokenTTL = time.Hour
	// MinPasswordLength is the shortest node password Admit takes
	// (NewPassword's are 64 hex digits).
	MinPasswordLength = 32
	// fieldManager applies the RBAC and the agents' admission policies.
	fieldManager = "kubeboot-nodejoin"
	// AgentsGroup is the group of the nodes' own users (AgentUser): what
	// a node's process runs beside its kubelet and kube-proxy (the pod
	// network, local storage) acts as its node's.
	AgentsGroup = "system:kubeboot:agents"
	// agentUserPrefix begins an agent user's name; the node's follows.
	agentUserPrefix = "system:kubeboot:agent:"
	// agentRole is the agents' ClusterRole, and its binding's name.
	agentRole = "kubeboot:agent"
	// ownNodePolicy keeps an agent's writes of Nodes to its own.
	ownNodePolicy = "kubeboot-agents-own-node"
)

// ErrRefused is a join Admit refuses: a name it cannot bind, or one bound
// to another password (ErrNameTaken).
var ErrRefused = errors.New("node join refused")

// ErrNameTaken is a join under a node name bound to another password.
var ErrNameTaken = fmt.Errorf("%w: the node name is taken", ErrRefused)

// NewPassword returns a new random node password.
func NewPassword() (string, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return "", err
	}
	return hex.EncodeToString(secret), nil
}

// PasswordSecretName is the Secret in kube-system that binds nodeName to
// its password.
func PasswordSecretName(nodeName string) string { return nodeName + passwordSecretSuffix }

// Admit binds nodeName to password on the node's first join, or checks
// the password against the binding, and returns a new bootstrap token
// (id.secret) for that node. It refuses, with ErrNameTaken, a name bound
// to another password, or that a Node has without a binding.
func Admit(ctx context.Context, client kubernetes.Interface, nodeName, password string) (string, error) {
	if errs := validation.IsDNS1123Subdomain(PasswordSecretName(nodeName)); len(errs) > 0 {
		return "", fmt.Errorf("%w: node name %q: %s", ErrRefused, nodeName, strings.Join(errs, "; "))
	}
	if len(password) < MinPasswordLength {
		return "", fmt.Errorf("%w: the node password is shorter than %d characters", ErrRefused, MinPasswordLength)
	}
	if err := ensureRBAC(ctx, client); err != nil {
		return "", fmt.Errorf("RBAC for the TLS bootstrap: %w", err)
	}
	if err := bind(ctx, client, nodeName, password); err != nil {
		return "", err
	}
	return issueToken(ctx, client, nodeName)
}

// bind checks password against nodeName's binding, creating the binding
// on the node's first join.
func bind(ctx context.Context, client kubernetes.Interface, nodeName, password string) error {
	sum := sha256.Sum256([]byte(password))
	hash := hex.EncodeToString(sum[:])
	secrets := client.CoreV1().Secrets(metav1.NamespaceSystem)
	secret, err := secrets.Get(ctx, PasswordSecretName(nodeName), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err == nil {
			return fmt.Errorf("%w: node %s exists and joined without a node password; delete the Node to join under its name", ErrNameTaken, nodeName)
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: PasswordSecretName(nodeName), Namespace: metav1.NamespaceSystem},
			Type:       PasswordSecretType,
			Data:       map[string][]byte{passwordHashKey: []byte(hash)},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%w: node %s is joining from another host right now", ErrNameTaken, nodeName)
		}
		return err
	}
	if err != nil {
		return err
	}
	if subtle.ConstantTimeCompare(secret.Data[passwordHashKey], []byte(hash)) != 1 {
		return fmt.Errorf("%w: node %s joined from another host (its node password differs); delete the Node, or choose another name with --node-name", ErrNameTaken, nodeName)
	}
	return nil
}

// issueToken creates a bootstrap token for nodeName.
func issueToken(ctx context.Context, client kubernetes.Interface, nodeName string) (string, error) {
	token, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		return "", err
	}
	ts, err := bootstraptokenv1.NewBootstrapTokenString(token)
	if err != nil {
		return "", err
	}
	bt := bootstraptokenv1.BootstrapToken{
		Token:       ts,
		Description: "The kubelet of node " + nodeName + " bootstraps its client certificate with it.",
		TTL:         &metav1.Duration{Duration: tokenTTL},
		Usages:      []string{"authentication"},
		Groups:      []string{Group},
	}
	secret := bootstraptokenv1.BootstrapTokenToSecret(&bt)
	secret.Annotations = map[string]string{NodeAnnotation: nodeName}
	if _, err := client.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("bootstrap token: %w", err)
	}
	return token, nil
}

// JoinGroup is the group `kubeboot token create` gives its bootstrap
// tokens by default (k3s's system:bootstrappers:k3s:default-node-token):
// an agent joins with one. No RBAC binds it: the token's holder gets a
// node's credentials only through Admit.
const JoinGroup = "system:bootstrappers:kubeboot:default-node-token"

// CheckJoinToken checks a bootstrap token an agent joins with, through
// the API server's bootstrap token authenticator (a TokenReview): it must
// authenticate (be unexpired, with the authentication usage), and not be
// one Admit issued for a kubelet (of Group), which bootstraps that node
// alone. It returns ErrRefused, wrapped, for a token that may not join.
//
// The authenticator reads the tokens' Secrets from its informer's cache,
// which lags a token just created (`kubeboot token create`, then a join
// at once): a token whose Secret the store already holds, with its
// secret, is reviewed again until the cache has caught up, for up to
// tokenCacheLag.
func CheckJoinToken(ctx context.Context, client kubernetes.Interface, token string) error {
	review := func(ctx context.Context) (bool, error) {
		r, err := client.AuthenticationV1().TokenReviews().Create(ctx,
			&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("reviewing the bootstrap token: %w", err)
		}
		if slices.Contains(r.Status.User.Groups, Group) {
			return false, fmt.Errorf("%w: the bootstrap token is a kubelet's, for its node alone", ErrRefused)
		}
		return r.Status.Authenticated, nil
	}
	ok, err := review(ctx)
	if err == nil && !ok && storedToken(ctx, client, token) {
		err = wait.PollUntilContextTimeout(ctx, tokenCachePoll, tokenCacheLag, false, func(ctx context.Context) (bool, error) {
			ok, err = review(ctx)
			return ok, err
		})
		if wait.Interrupted(err) {
			err = nil
		}
	}
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("%w: the bootstrap token is unknown, expired, or not for authentication", ErrRefused)
	}
	return nil
}

// How long, and how often, CheckJoinToken waits for the authenticator's
// cache to have a stored token.
var (
	tokenCacheLag  = 10 * time.Second
	tokenCachePoll = 100 * time.Millisecond
)

// storedToken tells whether the API server's store holds token's Secret
// with its secret: read live, not from a cache.
func storedToken(ctx context.Context, client kubernetes.Interface, token string) bool {
	id, secret, ok := strings.Cut(token, ".")
	if !ok || !bootstraputil.IsValidBootstrapToken(token) {
		return false
	}
	s, err := client.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, bootstraputil.BootstrapTokenSecretName(id), metav1.GetOptions{})
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(s.Data[bootstrapapi.BootstrapTokenSecretKey], []byte(secret)) == 1
}

// AgentUser is the user of node's process beside its kubelet, in group
// AgentsGroup.
func AgentUser(node string) string { return agentUserPrefix + node }

// AgentNode is the node whose agent user (AgentUser) is name, if it is
// one.
func AgentNode(name string) (string, bool) {
	node, ok := strings.CutPrefix(name, agentUserPrefix)
	return node, ok && node != ""
}

// IsOwnAgent is the CEL expression, for an admission policy, that holds
// when the request's user is the agent of the node named nodeExpr.
func IsOwnAgent(nodeExpr string) string {
	return fmt.Sprintf("request.userInfo.username == %q + %s", agentUserPrefix, nodeExpr)
}

// ApplyAgentPolicy applies a ValidatingAdmissionPolicy named name, and
// its binding, that admits the agents' creates, updates and deletes of
// resources (core group) only where the CEL expression validation
// holds, refusing the others as Forbidden with message: RBAC cannot
// tell one node's objects from another's.
func ApplyAgentPolicy(ctx context.Context, client kubernetes.Interface, name string, resources []string, validation, message string) error {
	apply := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	isAgent := fmt.Sprintf("has(request.userInfo.groups) && %q in request.userInfo.groups", AgentsGroup)
	policy := admissionapply.ValidatingAdmissionPolicy(name).WithSpec(admissionapply.ValidatingAdmissionPolicySpec().
		WithFailurePolicy(admissionregistrationv1.Fail).
		WithMatchConstraints(admissionapply.MatchResources().WithResourceRules(admissionapply.NamedRuleWithOperations().
			WithAPIGroups("").WithAPIVersions("*").WithResources(resources...).
			WithOperations(admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete))).
		WithMatchConditions(admissionapply.MatchCondition().WithName("agent").WithExpression(isAgent)).
		WithValidations(admissionapply.Validation().WithExpression(validation).
			WithMessage(message).WithReason(metav1.StatusReasonForbidden)))
	if _, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Apply(ctx, policy, apply); err != nil {
		return fmt.Errorf("ValidatingAdmissionPolicy %s: %w", name, err)
	}
	binding := admissionapply.ValidatingAdmissionPolicyBinding(name).WithSpec(admissionapply.ValidatingAdmissionPolicyBindingSpec().
		WithPolicyName(name).WithValidationActions(admissionregistrationv1.Deny))
	if _, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Apply(ctx, binding, apply); err != nil {
		return fmt.Errorf("ValidatingAdmissionPolicyBinding %s: %w", name, err)
	}
	return nil
}

// ensureRBAC lets Group's tokens ask for node client certificates and
// read Nodes (the kubelet looks its Node up before it registers), and
// lets nodes renew their own certificates, and lets the apiserver use the
// kubelets' API (logs, exec): kubeadm's TLS bootstrap RBAC, without the
// binding that has any request of a bootstrap token approved. The nodes'
// agents may read every Node and write their own (flannel keeps its
// node's annotations and NetworkUnavailable condition), which an
// admission policy holds them to.
func ensureRBAC(ctx context.Context, client kubernetes.Interface) error {
	const getNodes = "kubeboot:get-nodes"
	apply := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	for _, role := range []*rbacapply.ClusterRoleApplyConfiguration{
		rbacapply.ClusterRole(getNodes).WithRules(
			rbacapply.PolicyRule().WithAPIGroups("").WithResources("nodes").WithVerbs("get")),
		rbacapply.ClusterRole(agentRole).WithRules(
			rbacapply.PolicyRule().WithAPIGroups("").WithResources("nodes").WithVerbs("get", "list", "watch", "patch"),
			rbacapply.PolicyRule().WithAPIGroups("").WithResources("nodes/status").WithVerbs("patch")),
	} {
		if _, err := client.RbacV1().ClusterRoles().Apply(ctx, role, apply); err != nil {
			return err
		}
	}
	if err := ApplyAgentPolicy(ctx, client, ownNodePolicy, []string{"nodes", "nodes/status"},
		IsOwnAgent("request.name"), "a node's agent writes only its own Node"); err != nil {
		return err
	}
	for _, b := range []struct{ name, role, kind, subject string }{
		{"kubeboot:kubelet-bootstrap", "system:node-bootstrapper", rbacv1.GroupKind, Group},
		{getNodes, getNodes, rbacv1.GroupKind, Group},
		{agentRole, agentRole, rbacv1.GroupKind, AgentsGroup},
		{"kubeboot:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", rbacv1.GroupKind, "system:nodes"},
		{"kubeboot:apiserver-kubelet-api-admin", "system:kubelet-api-admin", rbacv1.UserKind, kubeadmconstants.APIServerKubeletClientCertCommonName},
	} {
		binding := rbacapply.ClusterRoleBinding(b.name).
			WithRoleRef(rbacapply.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(b.role)).
			WithSubjects(rbacapply.Subject().WithAPIGroup(rbacv1.GroupName).WithKind(b.kind).WithName(b.subject))
		if _, err := client.RbacV1().ClusterRoleBindings().Apply(ctx, binding, apply); err != nil {
			return err
		}
	}
	return nil
}
