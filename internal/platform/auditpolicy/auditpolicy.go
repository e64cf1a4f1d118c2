// Package auditpolicy is the audit policy a kubeboot server records with
// when no audit backend is configured: the CIS benchmark's "minimal audit
// policy" (3.2.1), covering its concerns (3.2.2) at the Metadata level, so
// that no Secret value or request body ever reaches the log.
//
// It records who changed what (every write, at any resource), who read a
// credential (Secrets, ConfigMaps, tokens, token reviews) and who reached
// into a workload (exec, attach, port-forward, proxy). It leaves out what
// is frequent and says nothing about people: health and metrics probes,
// Lease renewals, Events, and reads of everything else. The file is
// written once, in the data dir, for the user to edit.
package auditpolicy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// PolicyPath is where a data dir keeps the default policy.
func PolicyPath(dataDir string) string { return filepath.Join(dataDir, "audit", "policy.yaml") }

// LogPath is where a data dir keeps the audit log of the default policy.
func LogPath(dataDir string) string { return filepath.Join(dataDir, "logs", "audit.log") }

// Policy is the default policy, as written to PolicyPath.
const Policy = `# kubeboot's default audit policy (CIS Kubernetes Benchmark 3.2.1, 3.2.2).
# Edit it freely: kubeboot writes it only when it does not exist.
apiVersion: audit.k8s.io/v1
kind: Policy
# One event per request, when its response is known.
omitStages: [RequestReceived]
rules:
# Probes, metrics and discovery: frequent, and nobody's action.
- level: None
  nonResourceURLs: [/healthz*, /livez*, /readyz*, /metrics, /version, /api, /api/*, /apis, /apis/*, /openapi/*]
# Leases are renewed every few seconds by each node and elected component;
# Events are the cluster's own log.
- level: None
  resources:
  - {group: coordination.k8s.io, resources: [leases]}
  verbs: [get, list, watch, update, patch]
- level: None
  resources:
  - {group: "", resources: [events]}
  - {group: events.k8s.io, resources: [events]}
# Who read or changed a credential: metadata only, never the values.
- level: Metadata
  resources:
  - {group: "", resources: [secrets, configmaps, serviceaccounts/token]}
  - {group: authentication.k8s.io, resources: [tokenreviews]}
# Who reached into a workload or node, whatever the verb.
- level: Metadata
  resources:
  - {group: "", resources: [pods/exec, pods/attach, pods/portforward, pods/proxy, services/proxy, nodes/proxy]}
# Every change to anything.
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
# Reads of everything else are not recorded.
- level: None
`

// Ensure writes Policy to path (0600, in a 0700 directory) unless a file
// is there, and reports whether it wrote it.
func Ensure(path string) (bool, error) {
	if _, err := os.Stat(path); err == nil {
		return false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, err
	}
	// Written aside and renamed, so a crash never leaves half a policy
	// that the next start would keep.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(Policy), 0o600); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return false, fmt.Errorf("writing %s: %w", path, err)
	}
	return true, nil
}
