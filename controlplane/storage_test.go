package controlplane

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStorageRecord: a data dir an earlier or the same kubeboot ran on is
// taken and recorded as this one's; one a later storage version or
// Kubernetes minor ran on is refused, a later patch release's taken.
func TestStorageRecord(t *testing.T) {
	now := thisStorage()
	for _, tc := range []struct {
		name    string
		was     *storageRecord
		refused bool
	}{
		{name: "a new data dir"},
		{name: "the same kubeboot", was: &now},
		{name: "an earlier Kubernetes minor", was: &storageRecord{StorageVersion: StorageVersion, Kubernetes: "1.36.4", Kubeboot: "0.0.9"}},
		{name: "a later Kubernetes patch release", was: &storageRecord{StorageVersion: StorageVersion, Kubernetes: strings.TrimSuffix(now.Kubernetes, "2") + "9", Kubeboot: "0.1.1"}},
		{name: "a later storage version", was: &storageRecord{StorageVersion: StorageVersion + 1, Kubernetes: now.Kubernetes, Kubeboot: "0.2.0"}, refused: true},
		{name: "a later Kubernetes minor", was: &storageRecord{StorageVersion: StorageVersion, Kubernetes: "1.99.0", Kubeboot: "0.2.0"}, refused: true},
		{name: "a later Kubernetes major", was: &storageRecord{StorageVersion: StorageVersion, Kubernetes: "2.0.0", Kubeboot: "1.0.0"}, refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, storageFileName)
			if tc.was != nil {
				data, _ := json.Marshal(tc.was)
				if err := os.WriteFile(path, data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := checkStorage(dir)
			if tc.refused {
				if err == nil || !strings.Contains(err.Error(), "a downgrade across a storage change is refused") {
					t.Errorf("checkStorage = %v, want a refusal", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("checkStorage = %v", err)
			}
			if err := recordStorage(dir); err != nil {
				t.Fatal(err)
			}
			var got storageRecord
			data, err := os.ReadFile(path)
			if err != nil || json.Unmarshal(data, &got) != nil || got != now {
				t.Errorf("recorded %s (%v), want %+v", data, err, now)
			}
		})
	}
}
