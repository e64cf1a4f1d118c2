package controlplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	utilversion "k8s.io/apimachinery/pkg/util/version"

	"github.com/kubeboot/kubeboot/internal/platform/pki"
	"github.com/kubeboot/kubeboot/internal/platform/version"
)

// StorageVersion is the version of what kubeboot keeps beyond the API's
// objects (the data dir's files, its own records in etcd). A change an
// earlier kubeboot cannot read bumps it; a server refuses a data dir of a
// later one, as it refuses one of a later Kubernetes minor: a downgrade
// across a storage change (docs/operations.md#upgrades).
const StorageVersion = 1

// storageFileName records, in the data dir, what last ran on it.
const storageFileName = "storage-version"

// storageRecord is storageFileName's content.
type storageRecord struct {
	// StorageVersion is the StorageVersion of the kubeboot that ran.
	StorageVersion int `json:"storageVersion"`
	// Kubernetes is the Kubernetes version it served, e.g. 1.37.2.
	Kubernetes string `json:"kubernetes"`
	// Kubeboot is its release.
	Kubeboot string `json:"kubeboot"`
}

// thisStorage is this kubeboot's record.
func thisStorage() storageRecord {
	return storageRecord{StorageVersion: StorageVersion, Kubernetes: version.Kube(), Kubeboot: version.Kubeboot}
}

// checkStorage refuses a data dir a later kubeboot ran on: one of a later
// StorageVersion or Kubernetes minor. A data dir without the record (new,
// or of a kubeboot before it) is taken.
func checkStorage(dataDir string) error {
	data, err := os.ReadFile(filepath.Join(dataDir, storageFileName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	var was storageRecord
	if err := json.Unmarshal(data, &was); err != nil {
		return fmt.Errorf("%s: %w", storageFileName, err)
	}
	now := thisStorage()
	wasKube, err := utilversion.ParseGeneric(was.Kubernetes)
	if err != nil {
		return fmt.Errorf("%s: kubernetes: %w", storageFileName, err)
	}
	nowKube := utilversion.MustParseGeneric(now.Kubernetes)
	if was.StorageVersion > now.StorageVersion || wasKube.Major() > nowKube.Major() ||
		wasKube.Major() == nowKube.Major() && wasKube.Minor() > nowKube.Minor() {
		return fmt.Errorf("kubeboot %s (storage version %d, Kubernetes %s) ran on it; this kubeboot %s (storage version %d, Kubernetes %s) cannot: "+
			"a downgrade across a storage change is refused; run the later kubeboot, or restore a snapshot taken before the upgrade into a new data dir",
			was.Kubeboot, was.StorageVersion, was.Kubernetes, now.Kubeboot, now.StorageVersion, now.Kubernetes)
	}
	return nil
}

// recordStorage records in the data dir that this kubeboot runs on it.
func recordStorage(dataDir string) error {
	path := filepath.Join(dataDir, storageFileName)
	data, err := json.Marshal(thisStorage())
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return nil
	}
	if err := pki.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("--data-dir %s: %w", dataDir, err)
	}
	return nil
}
