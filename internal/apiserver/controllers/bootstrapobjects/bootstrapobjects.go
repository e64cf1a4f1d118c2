// Package bootstrapobjects stores kube-apiserver's bootstrap objects at
// start: the default RBAC roles and bindings, the system PriorityClasses
// and the API Priority and Fairness configuration. The objects are
// upstream's (bootstrappolicy, SystemPriorityClasses, the flowcontrol
// bootstrap configuration) and so is the reconciliation (create what is
// missing, add missing rules and subjects, respect the autoupdate
// annotations).
//
// It replaces the rbac/bootstrap-roles,
// scheduling/bootstrap-system-priority-classes and
// priority-and-fairness-config-producer hooks of upstream's storage
// providers for one reason, time: they make their first attempt only after
// a 1 s wait or a 100 ms poll and then store ~150 objects one by one, which
// was more than half of kubeboot's start. Here the first attempt is
// immediate, objects are reconciled concurrently and read from the
// server's informers, and a fresh server's first writes are paced so that
// they do not wait for the admission chain's 100 ms re-check (writeGate).
package bootstrapobjects

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	kubeadmconstants "k8s.io/kubernetes/cmd/kubeadm/app/constants"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	rbacinformers "k8s.io/client-go/informers/rbac/v1"
	"k8s.io/client-go/kubernetes"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/component-helpers/auth/rbac/reconciliation"
	"k8s.io/klog/v2"
	schedulingapiv1 "k8s.io/kubernetes/pkg/apis/scheduling/v1"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"
)

// Timing of the attempts. Timeout is upstream's: a server that cannot
// store its bootstrap policy in that time stops with the error.
const (
	retryInterval = 100 * time.Millisecond
	Timeout       = 30 * time.Second
	// workers bounds the concurrent reconciliations. The hooks run
	// before the server is ready, and the more of the ~130 creates of a
	// fresh start share one etcd commit the sooner it is: 32 workers
	// started a fresh server 60-80 ms sooner than 8 (bench/startup, two
	// alternating batches of 6).
	workers = 32
)

// RBAC keeps kube-apiserver 1.37's default ClusterRoles,
// ClusterRoleBindings, Roles and RoleBindings.
type RBAC struct {
	client    kubernetes.Interface
	informers rbacinformers.Interface
	synced    []cache.InformerSynced
}

// NewRBAC writes through client and reads through informers, which it
// registers; the caller starts them. The server's informers are synced
// by the time the hook runs, so a restart compares the ~140 objects
// without a request.
func NewRBAC(client kubernetes.Interface, informers rbacinformers.Interface) *RBAC {
	return &RBAC{client: client, informers: informers, synced: []cache.InformerSynced{
		informers.ClusterRoles().Informer().HasSynced,
		informers.ClusterRoleBindings().Informer().HasSynced,
		informers.Roles().Informer().HasSynced,
		informers.RoleBindings().Informer().HasSynced,
	}}
}

// Ensure creates or reconciles every object, retrying until all succeeded
// or Timeout.
func (r *RBAC) Ensure(ctx context.Context) error {
	if err := waitForSync(ctx, "RBAC", r.synced); err != nil {
		return err
	}
	if err := untilDone(ctx, "default RBAC policy", func(ctx context.Context) error {
		return run(rbacTasks(r.client, r.informers))
	}); err != nil {
		return err
	}
	return r.waitForPolicy(ctx)
}

// waitForPolicy returns once the informers, which the RBAC authorizer
// reads, hold every default ClusterRole and ClusterRoleBinding: until
// then a fresh server would refuse what the policy allows (anonymous
// /readyz, a component's first request) though it reports ready, for as
// long as the writes take to come back through the watch.
func (r *RBAC) waitForPolicy(ctx context.Context) error {
	roles, bindings := r.informers.ClusterRoles().Lister(), r.informers.ClusterRoleBindings().Lister()
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, Timeout, true, func(context.Context) (bool, error) {
		for _, role := range bootstrappolicy.ClusterRoles() {
			if _, err := roles.Get(role.Name); err != nil {
				return false, nil
			}
		}
		for _, binding := range append(bootstrappolicy.ClusterRoleBindings(), kubeadmClusterRoleBindings()...) {
			if _, err := bindings.Get(binding.Name); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the authorizer to see the default RBAC policy: %w", err)
	}
	return nil
}

// EnsurePriorityClasses creates the system PriorityClasses that do not
// exist, retrying until all succeeded or Timeout.
func EnsurePriorityClasses(ctx context.Context, client kubernetes.Interface) error {
	return untilDone(ctx, "system PriorityClasses", func(ctx context.Context) error {
		var tasks []func() error
		for _, pc := range schedulingapiv1.SystemPriorityClasses() {
			tasks = append(tasks, func() error {
				// A read first, as upstream's hook: on a restart they exist,
				// and a create that fails costs a write's whole path.
				_, err := client.SchedulingV1().PriorityClasses().Get(ctx, pc.Name, metav1.GetOptions{})
				if err == nil {
					return nil
				}
				if !apierrors.IsNotFound(err) {
					return fmt.Errorf("PriorityClass %s: %w", pc.Name, err)
				}
				_, err = client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{})
				switch {
				case err == nil:
					klog.FromContext(ctx).Info("Created PriorityClass", "name", pc.Name, "value", pc.Value)
				case apierrors.IsAlreadyExists(err):
				default:
					return fmt.Errorf("PriorityClass %s: %w", pc.Name, err)
				}
				return nil
			})
		}
		return run(tasks)
	})
}

// untilDone runs attempt at once and then every retryInterval until it
// succeeds, ctx ends or Timeout passes.
func untilDone(ctx context.Context, what string, attempt func(context.Context) error) error {
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, retryInterval, Timeout, true, func(ctx context.Context) (bool, error) {
		if lastErr = attempt(ctx); lastErr != nil {
			klog.FromContext(ctx).V(2).Info("Storing bootstrap objects failed, will retry", "objects", what, "err", lastErr)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("storing the %s: %w (last error: %v)", what, err, lastErr)
	}
	return nil
}

// waitForSync returns once every informer has synced. The server's
// informers start before it serves and have synced by the time the hooks
// run; it polls more often than client-go's WaitForCacheSync (100 ms).
func waitForSync(ctx context.Context, what string, synced []cache.InformerSynced) error {
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, Timeout, true, func(context.Context) (bool, error) {
		for _, s := range synced {
			if !s() {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the %s informers to sync: %w", what, err)
	}
	return nil
}

// rbacTasks reconciles each object of upstream's bootstrap policy.
// kubeadmClusterRoleBindings are kubeadm's additions to the bootstrap
// policy that kubeboot's clusters have: kubeadm:cluster-admins, whose group
// the admin kubeconfig's user is in (kubeadm 1.29+), bound to
// cluster-admin.
func kubeadmClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	return []rbacv1.ClusterRoleBinding{{
		ObjectMeta: metav1.ObjectMeta{Name: kubeadmconstants.ClusterAdminsGroupAndClusterRoleBinding,
			Annotations: map[string]string{rbacv1.AutoUpdateAnnotationKey: "true"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: kubeadmconstants.ClusterAdminsGroupAndClusterRoleBinding}},
	}}
}

func rbacTasks(client kubernetes.Interface, informers rbacinformers.Interface) []func() error {
	rbac := client.RbacV1()
	namespaces := client.CoreV1().Namespaces()
	clusterRoles := cachedClusterRoles{reconciliation.ClusterRoleModifier{Client: rbac.ClusterRoles()}, informers.ClusterRoles().Lister()}
	clusterRoleBindings := cachedClusterRoleBindings{reconciliation.ClusterRoleBindingClientAdapter{Client: rbac.ClusterRoleBindings()}, informers.ClusterRoleBindings().Lister()}
	roles := cachedRoles{reconciliation.RoleModifier{Client: rbac, NamespaceClient: namespaces}, informers.Roles().Lister()}
	roleBindings := cachedRoleBindings{reconciliation.RoleBindingClientAdapter{Client: rbac, NamespaceClient: namespaces}, informers.RoleBindings().Lister()}
	var tasks []func() error
	for _, role := range append(bootstrappolicy.ClusterRoles(), bootstrappolicy.ControllerRoles()...) {
		tasks = append(tasks, reconcileRole("clusterrole", role.Name, "", reconciliation.ReconcileRoleOptions{
			Role:    reconciliation.ClusterRoleRuleOwner{ClusterRole: &role},
			Client:  clusterRoles,
			Confirm: true,
		}))
	}
	for _, binding := range slices.Concat(bootstrappolicy.ClusterRoleBindings(), bootstrappolicy.ControllerRoleBindings(), kubeadmClusterRoleBindings()) {
		tasks = append(tasks, reconcileBinding("clusterrolebinding", binding.Name, "", reconciliation.ReconcileRoleBindingOptions{
			RoleBinding: reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: &binding},
			Client:      clusterRoleBindings,
			Confirm:     true,
		}))
	}
	for ns, nsRoles := range bootstrappolicy.NamespaceRoles() {
		for _, role := range nsRoles {
			tasks = append(tasks, reconcileRole("role", role.Name, ns, reconciliation.ReconcileRoleOptions{
				Role:    reconciliation.RoleRuleOwner{Role: &role},
				Client:  roles,
				Confirm: true,
			}))
		}
	}
	for ns, bindings := range bootstrappolicy.NamespaceRoleBindings() {
		for _, binding := range bindings {
			tasks = append(tasks, reconcileBinding("rolebinding", binding.Name, ns, reconciliation.ReconcileRoleBindingOptions{
				RoleBinding: reconciliation.RoleBindingAdapter{RoleBinding: &binding},
				Client:      roleBindings,
				Confirm:     true,
			}))
		}
	}
	return tasks
}

// The reconcilers' clients with reads from the informers' caches. A
// stale read costs a refused write and a new attempt, as a concurrent
// change does.

type cachedClusterRoles struct {
	reconciliation.ClusterRoleModifier
	lister rbaclisters.ClusterRoleLister
}

func (c cachedClusterRoles) Get(_, name string) (reconciliation.RuleOwner, error) {
	r, err := c.lister.Get(name)
	if err != nil {
		return nil, err
	}
	return reconciliation.ClusterRoleRuleOwner{ClusterRole: r.DeepCopy()}, nil
}

type cachedClusterRoleBindings struct {
	reconciliation.ClusterRoleBindingClientAdapter
	lister rbaclisters.ClusterRoleBindingLister
}

func (c cachedClusterRoleBindings) Get(_, name string) (reconciliation.RoleBinding, error) {
	b, err := c.lister.Get(name)
	if err != nil {
		return nil, err
	}
	return reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: b.DeepCopy()}, nil
}

type cachedRoles struct {
	reconciliation.RoleModifier
	lister rbaclisters.RoleLister
}

func (c cachedRoles) Get(namespace, name string) (reconciliation.RuleOwner, error) {
	r, err := c.lister.Roles(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	return reconciliation.RoleRuleOwner{Role: r.DeepCopy()}, nil
}

type cachedRoleBindings struct {
	reconciliation.RoleBindingClientAdapter
	lister rbaclisters.RoleBindingLister
}

func (c cachedRoleBindings) Get(namespace, name string) (reconciliation.RoleBinding, error) {
	b, err := c.lister.RoleBindings(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	return reconciliation.RoleBindingAdapter{RoleBinding: b.DeepCopy()}, nil
}

func reconcileRole(kind, name, namespace string, opts reconciliation.ReconcileRoleOptions) func() error {
	return func() error {
		return reconcile(kind, name, namespace, func() (reconciliation.ReconcileOperation, bool, any, error) {
			r, err := opts.Run()
			if err != nil {
				return "", false, nil, err
			}
			return r.Operation, r.Protected, r.MissingRules, nil
		})
	}
}

func reconcileBinding(kind, name, namespace string, opts reconciliation.ReconcileRoleBindingOptions) func() error {
	return func() error {
		return reconcile(kind, name, namespace, func() (reconciliation.ReconcileOperation, bool, any, error) {
			r, err := opts.Run()
			if err != nil {
				return "", false, nil, err
			}
			return r.Operation, r.Protected, r.MissingSubjects, nil
		})
	}
}

// reconcile runs one reconciliation, retried on conflicts and on the 503
// of storage version updates as upstream's hook does, and logs what it did.
func reconcile(kind, name, namespace string, run func() (op reconciliation.ReconcileOperation, protected bool, missing any, err error)) error {
	logger := klog.Background().WithValues("kind", kind+"."+rbacv1.GroupName, "name", name)
	if namespace != "" {
		logger = logger.WithValues("namespace", namespace)
	}
	retriable := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsServiceUnavailable(err) }
	err := retry.OnError(retry.DefaultBackoff, retriable, func() error {
		op, protected, missing, err := run()
		if err != nil {
			return err
		}
		switch {
		case protected && op != reconciliation.ReconcileNone:
			logger.Info("Skipped reconcile-protected bootstrap object; it lacks defaults", "missing", missing)
		case op != reconciliation.ReconcileNone:
			logger.V(2).Info("Reconciled bootstrap object", "operation", op, "missing", missing)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s %s: %w", kind, name, err)
	}
	return nil
}

// run runs tasks on workers goroutines and returns the first error.
func run(tasks []func() error) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	next := make(chan func() error)
	for range min(workers, len(tasks)) {
		wg.Go(func() {
			for task := range next {
				if err := task(); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for _, task := range tasks {
		next <- task
	}
	close(next)
	wg.Wait()
	return firstErr
}
