// Package bootstrappolicy stores kube-apiserver's bootstrap objects at
// start: the default RBAC roles and bindings and the system
// PriorityClasses. The objects are upstream's (bootstrappolicy,
// SystemPriorityClasses) and so is the reconciliation (create what is
// missing, add missing rules and subjects, respect the
// rbac.authorization.kubernetes.io/autoupdate=false annotation).
//
// It replaces the rbac/bootstrap-roles and
// scheduling/bootstrap-system-priority-classes hooks of upstream's storage
// providers for one reason, time: they make their first attempt only after
// a 1 s wait and then reconcile ~130 objects one by one, which was more
// than half of kubeboot's start. Here the first attempt is immediate and
// objects are reconciled concurrently.
package bootstrappolicy

import (
	"context"
	"fmt"
	"sync"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
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

// EnsureRBAC creates or reconciles every default ClusterRole,
// ClusterRoleBinding, Role and RoleBinding of kube-apiserver 1.37,
// retrying until all succeeded or Timeout.
func EnsureRBAC(ctx context.Context, client kubernetes.Interface) error {
	return untilDone(ctx, "default RBAC policy", func(ctx context.Context) error {
		return run(rbacTasks(client))
	})
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

// rbacTasks reconciles each object of upstream's bootstrap policy.
func rbacTasks(client kubernetes.Interface) []func() error {
	rbac := client.RbacV1()
	namespaces := client.CoreV1().Namespaces()
	var tasks []func() error
	for _, role := range append(bootstrappolicy.ClusterRoles(), bootstrappolicy.ControllerRoles()...) {
		tasks = append(tasks, reconcileRole("clusterrole", role.Name, "", reconciliation.ReconcileRoleOptions{
			Role:    reconciliation.ClusterRoleRuleOwner{ClusterRole: &role},
			Client:  reconciliation.ClusterRoleModifier{Client: rbac.ClusterRoles()},
			Confirm: true,
		}))
	}
	for _, binding := range append(bootstrappolicy.ClusterRoleBindings(), bootstrappolicy.ControllerRoleBindings()...) {
		tasks = append(tasks, reconcileBinding("clusterrolebinding", binding.Name, "", reconciliation.ReconcileRoleBindingOptions{
			RoleBinding: reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: &binding},
			Client:      reconciliation.ClusterRoleBindingClientAdapter{Client: rbac.ClusterRoleBindings()},
			Confirm:     true,
		}))
	}
	for ns, roles := range bootstrappolicy.NamespaceRoles() {
		for _, role := range roles {
			tasks = append(tasks, reconcileRole("role", role.Name, ns, reconciliation.ReconcileRoleOptions{
				Role:    reconciliation.RoleRuleOwner{Role: &role},
				Client:  reconciliation.RoleModifier{Client: rbac, NamespaceClient: namespaces},
				Confirm: true,
			}))
		}
	}
	for ns, bindings := range bootstrappolicy.NamespaceRoleBindings() {
		for _, binding := range bindings {
			tasks = append(tasks, reconcileBinding("rolebinding", binding.Name, ns, reconciliation.ReconcileRoleBindingOptions{
				RoleBinding: reconciliation.RoleBindingAdapter{RoleBinding: &binding},
				Client:      reconciliation.RoleBindingClientAdapter{Client: rbac, NamespaceClient: namespaces},
				Confirm:     true,
			}))
		}
	}
	return tasks
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
