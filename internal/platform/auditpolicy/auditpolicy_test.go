package auditpolicy

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit/policy"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

func TestPolicyLevels(t *testing.T) {
	p, err := policy.LoadPolicyFromBytes([]byte(Policy))
	if err != nil {
		t.Fatalf("the default policy does not load: %v", err)
	}
	evaluator := policy.NewPolicyRuleEvaluator(p)
	alice := &user.DefaultInfo{Name: "alice"}
	node := &user.DefaultInfo{Name: "system:node:n1", Groups: []string{"system:nodes"}}
	resource := func(u user.Info, verb, group, resource, subresource string) authorizer.Attributes {
		return authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: group, Resource: resource, Subresource: subresource, ResourceRequest: true, Namespace: "default"}
	}
	for _, tc := range []struct {
		name  string
		attrs authorizer.Attributes
		want  auditinternal.Level
	}{
		{"read a Secret", resource(alice, "get", "", "secrets", ""), auditinternal.LevelMetadata},
		{"list Secrets", resource(alice, "list", "", "secrets", ""), auditinternal.LevelMetadata},
		{"watch ConfigMaps", resource(alice, "watch", "", "configmaps", ""), auditinternal.LevelMetadata},
		{"request a token", resource(node, "create", "", "serviceaccounts", "token"), auditinternal.LevelMetadata},
		{"review a token", resource(alice, "create", "authentication.k8s.io", "tokenreviews", ""), auditinternal.LevelMetadata},
		{"exec over websocket", resource(alice, "get", "", "pods", "exec"), auditinternal.LevelMetadata},
		{"port-forward", resource(alice, "create", "", "pods", "portforward"), auditinternal.LevelMetadata},
		{"create a Deployment", resource(alice, "create", "apps", "deployments", ""), auditinternal.LevelMetadata},
		{"delete a Pod", resource(alice, "delete", "", "pods", ""), auditinternal.LevelMetadata},
		{"patch a Node's status", resource(node, "patch", "", "nodes", "status"), auditinternal.LevelMetadata},
		{"create a Lease", resource(node, "create", "coordination.k8s.io", "leases", ""), auditinternal.LevelMetadata},
		{"delete a Lease", resource(alice, "delete", "coordination.k8s.io", "leases", ""), auditinternal.LevelMetadata},
		{"renew a Lease", resource(node, "update", "coordination.k8s.io", "leases", ""), auditinternal.LevelNone},
		{"create an Event", resource(node, "create", "", "events", ""), auditinternal.LevelNone},
		{"create an events.k8s.io Event", resource(node, "create", "events.k8s.io", "events", ""), auditinternal.LevelNone},
		{"list Pods", resource(alice, "list", "", "pods", ""), auditinternal.LevelNone},
		{"get a Node", resource(node, "get", "", "nodes", ""), auditinternal.LevelNone},
		{"readyz", authorizer.AttributesRecord{User: alice, Verb: "get", Path: "/readyz"}, auditinternal.LevelNone},
		{"discovery", authorizer.AttributesRecord{User: alice, Verb: "get", Path: "/apis/apps/v1"}, auditinternal.LevelNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := evaluator.EvaluatePolicyRule(tc.attrs)
			if got.Level != tc.want {
				t.Errorf("level %q, want %q", got.Level, tc.want)
			}
			if got.Level != auditinternal.LevelNone && !slices.Contains(got.OmitStages, auditinternal.StageRequestReceived) && !slices.Contains(p.OmitStages, auditinternal.StageRequestReceived) {
				t.Errorf("RequestReceived is recorded: two events per request")
			}
		})
	}
}

func TestEnsureKeepsAnEditedPolicy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit", "policy.yaml")
	if wrote, err := Ensure(path); err != nil || !wrote {
		t.Fatalf("Ensure on an empty dir: wrote %v, %v", wrote, err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("policy mode %v, want 0600", info.Mode().Perm())
	}
	if dir, _ := os.Stat(filepath.Dir(path)); dir.Mode().Perm() != 0o700 {
		t.Errorf("policy dir mode %v, want 0700", dir.Mode().Perm())
	}
	edited := []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: RequestResponse\n")
	if err := os.WriteFile(path, edited, 0o600); err != nil {
		t.Fatal(err)
	}
	if wrote, err := Ensure(path); err != nil || wrote {
		t.Fatalf("Ensure over an edited policy: wrote %v, %v", wrote, err)
	}
	if got, _ := os.ReadFile(path); string(got) != string(edited) {
		t.Errorf("the edited policy was replaced:\n%s", got)
	}
}
