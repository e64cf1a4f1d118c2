package bootstrappolicy_test

import (
	"context"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"

	kbpolicy "github.com/kubeboot/kubeboot/internal/controller/bootstrappolicy"
	"github.com/kubeboot/kubeboot/kubeboottest"
)

// TestEnsureRBACReconciles: a second run restores a deleted default
// ClusterRole and the rules taken from another, and leaves alone one its
// owner marked autoupdate=false, as kube-apiserver's hook does.
func TestEnsureRBACReconciles(t *testing.T) {
	srv := kubeboottest.Start(t, kubeboottest.Options{})
	client := kubernetes.NewForConfigOrDie(srv.Config)
	ctx := context.Background()
	roles := client.RbacV1().ClusterRoles()

	// The server's start stored every default ClusterRole.
	for _, want := range append(bootstrappolicy.ClusterRoles(), bootstrappolicy.ControllerRoles()...) {
		if _, err := roles.Get(ctx, want.Name, metav1.GetOptions{}); err != nil {
			t.Fatalf("default ClusterRole %s after start: %v", want.Name, err)
		}
	}

	if err := roles.Delete(ctx, "system:basic-user", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	stripRules := func(name string, annotate bool) {
		t.Helper()
		r, err := roles.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r.Rules = nil
		if annotate {
			r.Annotations[rbacv1.AutoUpdateAnnotationKey] = "false"
		}
		if _, err := roles.Update(ctx, r, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stripRules("system:discovery", false)
	stripRules("system:public-info-viewer", true)

	if err := kbpolicy.EnsureRBAC(ctx, client); err != nil {
		t.Fatal(err)
	}

	if _, err := roles.Get(ctx, "system:basic-user", metav1.GetOptions{}); err != nil {
		t.Errorf("deleted default ClusterRole not restored: %v", err)
	}
	if r, err := roles.Get(ctx, "system:discovery", metav1.GetOptions{}); err != nil || len(r.Rules) == 0 {
		t.Errorf("system:discovery rules not restored: %v, %v", r.Rules, err)
	}
	if r, err := roles.Get(ctx, "system:public-info-viewer", metav1.GetOptions{}); err != nil || len(r.Rules) != 0 {
		t.Errorf("system:public-info-viewer with autoupdate=false was changed: %v, %v", r.Rules, err)
	}
}

// TestEnsurePriorityClasses: the server's start stored both system
// PriorityClasses (which cannot be deleted), and another run, as on a
// restart, finds them and is not an error.
func TestEnsurePriorityClasses(t *testing.T) {
	srv := kubeboottest.Start(t, kubeboottest.Options{})
	client := kubernetes.NewForConfigOrDie(srv.Config)
	ctx := context.Background()
	pcs := client.SchedulingV1().PriorityClasses()
	if err := kbpolicy.EnsurePriorityClasses(ctx, client); err != nil {
		t.Fatal(err)
	}
	list, err := pcs.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, pc := range list.Items {
		names = append(names, pc.Name)
	}
	if want := []string{"system-cluster-critical", "system-node-critical"}; !slices.Equal(names, want) {
		t.Errorf("PriorityClasses = %v, want %v", names, want)
	}
}
