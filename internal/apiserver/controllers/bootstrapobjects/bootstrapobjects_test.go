package bootstrapobjects_test

import (
	"context"
	"slices"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"

	"github.com/kubeboot/kubeboot/internal/apiserver/controllers/bootstrapobjects"
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

	// Informers started now see the changes in their first list.
	factory := informers.NewSharedInformerFactory(client, 0)
	rbac := bootstrapobjects.NewRBAC(client, factory.Rbac().V1())
	runInformers(t, factory)
	if err := rbac.Ensure(ctx); err != nil {
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
	if err := bootstrapobjects.EnsurePriorityClasses(ctx, client); err != nil {
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

// TestFlowControlEnsure: a run restores a deleted mandatory and a deleted
// suggested object, leaves a suggested one alone whose owner turned
// auto-update off, and removes an auto-updated object upstream does not
// suggest, as kube-apiserver's priority-and-fairness-config-producer.
func TestFlowControlEnsure(t *testing.T) {
	srv := kubeboottest.Start(t, kubeboottest.Options{})
	client := kubernetes.NewForConfigOrDie(srv.Config)
	ctx := context.Background()
	schemas := client.FlowcontrolV1().FlowSchemas()
	levels := client.FlowcontrolV1().PriorityLevelConfigurations()

	for _, name := range []string{"exempt", "probes"} {
		if err := schemas.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kept, err := schemas.Get(ctx, "service-accounts", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kept.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] = "false"
	kept.Spec.MatchingPrecedence = 9000
	if _, err := schemas.Update(ctx, kept, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// An object an older version suggested: auto-updated, no longer wanted.
	old, err := levels.Get(ctx, "workload-low", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old.ObjectMeta = metav1.ObjectMeta{Name: "retired", Annotations: map[string]string{flowcontrolv1.AutoUpdateAnnotationKey: "true"}}
	if _, err := levels.Create(ctx, old, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	factory := informers.NewSharedInformerFactory(client, 0)
	fc := bootstrapobjects.NewFlowControl(client.FlowcontrolV1(), factory.Flowcontrol().V1())
	runInformers(t, factory)
	if err := fc.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"exempt", "probes"} {
		if _, err := schemas.Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("deleted FlowSchema %s not restored: %v", name, err)
		}
	}
	if fs, err := schemas.Get(ctx, "service-accounts", metav1.GetOptions{}); err != nil || fs.Spec.MatchingPrecedence != 9000 {
		t.Errorf("FlowSchema service-accounts with auto-update off was changed: %v, %v", fs, err)
	}
	if _, err := levels.Get(ctx, "retired", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("unwanted auto-updated PriorityLevelConfiguration: got %v, want NotFound", err)
	}
}

// runInformers starts the informers registered with factory until the
// test ends.
func runInformers(t *testing.T, factory informers.SharedInformerFactory) {
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
}
