package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// This file checks the system namespaces and the namespace life cycle.

// TestSystemNamespaces checks that the four namespaces a kube-apiserver
// creates exist and are Active.
func TestSystemNamespaces(t *testing.T) {
	t.Parallel()
	names := []string{"default", "kube-node-lease", "kube-public", "kube-system"}
	tb := parseTable(t, kubectl(t, append([]string{"get", "namespaces"}, names...)...))
	for _, name := range names {
		requireRow(t, "kubectl get namespaces "+name, tb, map[string]string{"NAME": lit(name), "STATUS": "Active", "AGE": age})
	}
}

// TestNamespaceCreate checks what a new namespace is given: the
// kubernetes finalizer, phase Active and the metadata.name label.
func TestNamespaceCreate(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	n := getNamespace(t, ns)
	if !slices.Contains(n.Spec.Finalizers, corev1.FinalizerKubernetes) {
		t.Errorf("namespace %s: spec.finalizers %q lacks kubernetes", ns, n.Spec.Finalizers)
	}
	if n.Status.Phase != corev1.NamespaceActive {
		t.Errorf("namespace %s: phase %q, want Active", ns, n.Status.Phase)
	}
	if got := n.Labels["kubernetes.io/metadata.name"]; got != ns {
		t.Errorf("namespace %s: label kubernetes.io/metadata.name %q", ns, got)
	}
}

// TestNamespaceDelete deletes a fresh namespace: the DELETE answers the
// namespace in phase Terminating with the kubernetes finalizer.
func TestNamespaceDelete(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	code, body := apiRequest(t, "DELETE", "/api/v1/namespaces/"+ns, nil)
	if code != 200 {
		t.Fatalf("DELETE namespace %s: HTTP %d, want 200\n%s", ns, code, body)
	}
	var n corev1.Namespace
	if err := json.Unmarshal(body, &n); err != nil || n.Kind != "Namespace" {
		t.Fatalf("DELETE namespace %s: answer is not the Namespace (%v)\n%s", ns, err, body)
	}
	requireTerminating(t, "DELETE answer", n)
}

// TestNamespaceTerminating deletes a namespace whose content a finalizer
// holds back: kubectl shows it Terminating until the content is gone.
func TestNamespaceTerminating(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	blockNamespace(t, ns)
	if out := kubectl(t, "delete", "namespace", ns, "--wait=false"); strings.TrimSpace(out) != `namespace "`+ns+`" deleted` {
		t.Errorf("kubectl delete namespace printed %q", out)
	}
	requireTerminating(t, "kubectl get namespace", getNamespace(t, ns))
	tb := parseTable(t, kubectl(t, "get", "namespace", ns))
	requireRow(t, "kubectl get namespace "+ns, tb, map[string]string{"NAME": lit(ns), "STATUS": "Terminating", "AGE": age})
}

// blockNamespace creates a configmap with a finalizer nobody removes
// during the test, so that a deleted namespace stays Terminating even
// where a namespace controller empties it; cleanup removes the finalizer.
func blockNamespace(t *testing.T, ns string) {
	t.Helper()
	kubectlStdin(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"blocker","finalizers":["e2e.kubeboot.io/block"]}}`,
		"create", "-n", ns, "-f", "-")
	t.Cleanup(func() {
		runKubectl(t, "", "patch", "configmap", "blocker", "-n", ns, "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)
	})
}

// getNamespace reads a namespace with kubectl.
func getNamespace(t *testing.T, name string) corev1.Namespace {
	t.Helper()
	var n corev1.Namespace
	if err := json.Unmarshal([]byte(kubectl(t, "get", "namespace", name, "-o", "json")), &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// requireTerminating checks a deleted namespace: deletionTimestamp set,
// phase Terminating, the kubernetes finalizer still there.
func requireTerminating(t *testing.T, what string, n corev1.Namespace) {
	t.Helper()
	if n.DeletionTimestamp == nil || time.Since(n.DeletionTimestamp.Time) > time.Minute {
		t.Errorf("%s: namespace %s deletionTimestamp %v, want just set", what, n.Name, n.DeletionTimestamp)
	}
	if n.Status.Phase != corev1.NamespaceTerminating {
		t.Errorf("%s: namespace %s phase %q, want Terminating", what, n.Name, n.Status.Phase)
	}
	if !slices.Contains(n.Spec.Finalizers, corev1.FinalizerKubernetes) {
		t.Errorf("%s: namespace %s spec.finalizers %q lacks kubernetes", what, n.Name, n.Spec.Finalizers)
	}
}
