package auditpolicy

import (
	"testing"

	"k8s.io/apiserver/pkg/audit/policy"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// FuzzLoadPolicy: an audit policy file (--audit-policy-file, or the data
// dir's audit/policy.yaml, the user's to edit) is loaded as the server
// loads it, at Complete, before anything starts: refused with an error,
// or a policy every request can be evaluated against.
func FuzzLoadPolicy(f *testing.F) {
	for _, seed := range []string{
		Policy,
		"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
		"apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: RequestResponse\n  resources:\n  - group: \"\"\n    resources: [\"pods/log\", \"secrets\"]\n    resourceNames: [a]\n  namespaces: [kube-system]\n  verbs: [get]\n  users: [alice]\n  userGroups: [\"system:masters\"]\n  nonResourceURLs: [\"/healthz*\"]\n",
		"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Bogus\n",
		"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []\n",
		"kind: Policy\n",
		"{",
		"",
	} {
		f.Add([]byte(seed))
	}
	requests := []authorizer.AttributesRecord{
		{User: &user.DefaultInfo{Name: "alice", Groups: []string{"system:masters"}}, Verb: "get", Namespace: "kube-system", APIGroup: "", Resource: "secrets", Name: "a", ResourceRequest: true},
		{User: &user.DefaultInfo{Name: "system:anonymous"}, Verb: "get", Path: "/healthz/etcd"},
		{User: &user.DefaultInfo{Name: "bob"}, Verb: "create", APIGroup: "apps", Resource: "deployments", Subresource: "scale", ResourceRequest: true},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := policy.LoadPolicyFromBytes(data)
		if err != nil {
			return
		}
		evaluator := policy.NewPolicyRuleEvaluator(p)
		for _, r := range requests {
			_ = evaluator.EvaluatePolicyRule(r)
		}
	})
}
