package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeadmBindings are kubeboot's additions to kube-apiserver's bootstrap
// policy, as kubeadm makes them: the admin kubeconfig's group bound to
// cluster-admin.
var kubeadmBindings = []string{"clusterrolebinding.rbac.authorization.k8s.io/kubeadm:cluster-admins"}

// TestRBACBootstrapObjectsMatchReference: a fresh server holds exactly the
// default ClusterRoles, ClusterRoleBindings, Roles and RoleBindings
// kube-apiserver 1.37 stores, and kubeadm's binding of the admins' group.
func TestRBACBootstrapObjectsMatchReference(t *testing.T) {
	t.Parallel()
	want := slices.Clone(kubeadmBindings)
	for _, line := range strings.Split(readTestdata(t, "rbac-bootstrap-objects.txt"), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			want = append(want, line)
		}
	}
	got := strings.Fields(kubectl(t, "get", "clusterroles,clusterrolebindings", "-o", "name"))
	var namespaced struct {
		Items []struct {
			Kind     string
			Metadata struct{ Namespace, Name string }
		}
	}
	if err := json.Unmarshal([]byte(kubectl(t, "get", "roles,rolebindings", "-A", "-o", "json")), &namespaced); err != nil {
		t.Fatal(err)
	}
	for _, it := range namespaced.Items {
		got = append(got, fmt.Sprintf("%s/%s.rbac.authorization.k8s.io/%s", it.Metadata.Namespace, strings.ToLower(it.Kind), it.Metadata.Name))
	}
	slices.Sort(got)
	slices.Sort(want)
	for _, name := range want {
		if _, found := slices.BinarySearch(got, name); !found {
			t.Errorf("missing %s", name)
		}
	}
	for _, name := range got {
		if _, found := slices.BinarySearch(want, name); !found {
			t.Errorf("unexpected %s", name)
		}
	}
}

// TestSchedulingAndFlowControlBootstrapObjects: the system
// PriorityClasses and the API Priority and Fairness configuration of a
// fresh server are kube-apiserver 1.37's, as `kubectl get` prints them.
func TestSchedulingAndFlowControlBootstrapObjects(t *testing.T) {
	t.Parallel()
	ref := strings.Split(strings.TrimSpace(readTestdata(t, "bootstrap-scheduling-and-flowcontrol.txt")), "\n\n")
	if len(ref) != 3 {
		t.Fatalf("reference has %d tables, want 3", len(ref))
	}
	for i, resource := range []string{"priorityclasses", "prioritylevelconfigurations", "flowschemas"} {
		got, want := withoutAge(kubectl(t, "get", resource)), withoutAge(ref[i])
		if got != want {
			t.Errorf("kubectl get %s:\n got\n%s\nwant\n%s", resource, got, want)
		}
	}
}

// withoutAge returns a kubectl table's cells without its AGE column,
// one line per row, cells separated by one space.
func withoutAge(table string) string {
	lines := strings.Split(strings.TrimSpace(table), "\n")
	age := slices.Index(strings.Fields(lines[0]), "AGE")
	var out []string
	for _, line := range lines {
		cells := strings.Fields(line)
		if age >= 0 && age < len(cells) {
			cells = slices.Delete(cells, age, age+1)
		}
		out = append(out, strings.Join(cells, " "))
	}
	return strings.Join(out, "\n")
}

// TestRBACDeniesThenAllows: a service account may do nothing until a
// RoleBinding grants it a Role, and the denial is upstream's Forbidden
// message. (Not the view ClusterRole: its rules are aggregated by the
// controller-manager's clusterrole-aggregation controller.)
func TestRBACDeniesThenAllows(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	kubectl(t, "create", "serviceaccount", "reader", "-n", ns)
	user := "system:serviceaccount:" + ns + ":reader"

	if r := runKubectl(t, "", "auth", "can-i", "list", "configmaps", "-n", ns, "--as", user); strings.TrimSpace(r.stdout) != "no" {
		t.Errorf("can-i before the binding = %q (%v), want no", r.stdout, r.err)
	}
	msg := kubectlFails(t, "", "get", "configmaps", "-n", ns, "--as", user)
	want := fmt.Sprintf(`Error from server (Forbidden): configmaps is forbidden: User "%s" cannot list resource "configmaps" in API group "" in the namespace "%s"`, user, ns)
	if msg != want {
		t.Errorf("denied list:\n got %q\nwant %q", msg, want)
	}

	kubectl(t, "create", "role", "configmap-reader", "--verb=get,list", "--resource=configmaps", "-n", ns)
	kubectl(t, "create", "rolebinding", "reader", "--role=configmap-reader", "--serviceaccount="+ns+":reader", "-n", ns)
	// The authorizer reads bindings from an informer: allow a moment.
	eventually(t, 10*time.Second, "the binding to take effect", func() (bool, string) {
		r := runKubectl(t, "", "auth", "can-i", "list", "configmaps", "-n", ns, "--as", user)
		return strings.TrimSpace(r.stdout) == "yes", r.stdout + r.stderr
	})
	kubectl(t, "get", "configmaps", "-n", ns, "--as", user)
	// The Role grants no writes, and nothing in other namespaces.
	for _, args := range [][]string{
		{"create", "configmaps", "-n", ns},
		{"list", "configmaps", "-n", "default"},
	} {
		if r := runKubectl(t, "", append([]string{"auth", "can-i"}, append(args, "--as", user)...)...); strings.TrimSpace(r.stdout) != "no" {
			t.Errorf("can-i %v = %q, want no", args, r.stdout)
		}
	}
}

// TestServiceAccountToken: `kubectl create token` issues a bound token the
// server authenticates as the service account, and which stops working
// when the account is deleted.
func TestServiceAccountToken(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	kubectl(t, "create", "serviceaccount", "robot", "-n", ns)
	token := strings.TrimSpace(kubectl(t, "create", "token", "robot", "-n", ns, "--duration=10m"))

	var who struct {
		Status struct {
			UserInfo struct {
				Username string
				Groups   []string
			}
		}
	}
	asRobot := tokenKubeconfig(t, token)
	out := kubectl(t, "--kubeconfig", asRobot, "auth", "whoami", "-o", "json")
	if err := json.Unmarshal([]byte(out), &who); err != nil {
		t.Fatalf("whoami: %v\n%s", err, out)
	}
	if want := "system:serviceaccount:" + ns + ":robot"; who.Status.UserInfo.Username != want {
		t.Errorf("whoami username = %q, want %q", who.Status.UserInfo.Username, want)
	}
	if !slices.Contains(who.Status.UserInfo.Groups, "system:serviceaccounts:"+ns) {
		t.Errorf("whoami groups = %v, want system:serviceaccounts:%s among them", who.Status.UserInfo.Groups, ns)
	}

	kubectl(t, "delete", "serviceaccount", "robot", "-n", ns)
	eventually(t, 10*time.Second, "the token of a deleted account to be refused", func() (bool, string) {
		r := runKubectl(t, "", "--kubeconfig", asRobot, "auth", "whoami")
		return strings.Contains(r.stderr, "Unauthorized"), r.stdout + r.stderr
	})
}

// tokenKubeconfig is the suite's kubeconfig with token as its only
// credential (the admin client certificate would win over a --token).
// Passed after the suite's own --kubeconfig, it replaces it.
func tokenKubeconfig(t *testing.T, token string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(suite.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	cfg.AuthInfos[ctx.AuthInfo] = &clientcmdapi.AuthInfo{Token: token}
	path := filepath.Join(t.TempDir(), "token.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAdmissionLimitRangerAndServiceAccount: upstream's admission chain
// runs: a Pod in a namespace without its default ServiceAccount is
// refused by the ServiceAccount plugin, and once it exists the Pod gets
// the LimitRange's defaults and the account's token volume.
func TestAdmissionLimitRangerAndServiceAccount(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`

	msg := kubectlFails(t, pod, "create", "-n", ns, "-f", "-")
	if want := fmt.Sprintf(`pods "p" is forbidden: error looking up service account %s/default: serviceaccount "default" not found`, ns); !strings.Contains(msg, want) {
		t.Errorf("pod without a default service account:\n got %q\nwant it to contain %q", msg, want)
	}

	kubectl(t, "create", "serviceaccount", "default", "-n", ns)
	kubectlStdin(t, `{"apiVersion":"v1","kind":"LimitRange","metadata":{"name":"defaults"},
		"spec":{"limits":[{"type":"Container","default":{"memory":"128Mi"},"defaultRequest":{"cpu":"100m"}}]}}`,
		"create", "-n", ns, "-f", "-")
	kubectlStdin(t, pod, "create", "-n", ns, "-f", "-")
	got := kubectl(t, "get", "pod", "p", "-n", ns, "-o",
		`jsonpath={.spec.containers[0].resources.limits.memory} {.spec.containers[0].resources.requests.cpu} {.spec.serviceAccountName} {.spec.volumes[0].projected.sources[0].serviceAccountToken.path}`)
	if want := "128Mi 100m default token"; got != want {
		t.Errorf("admitted pod = %q, want %q", got, want)
	}
}
