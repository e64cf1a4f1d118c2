package carotation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/internal/platform/clusterjoin"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// The cluster's record of its last CA rotation: a Secret in kube-system
// (where the join tokens' record is), whose keys are the files' paths in
// pki with "/" as "_" (a Secret's keys allow no "/"). Every server stages
// it in its pki's pending directory, and takes it at its next start.
const (
	// RecordName is the record's name in kube-system.
	RecordName = "kubeboot-ca-rotation"
	// RecordType is its type.
	RecordType corev1.SecretType = "kubeboot.io/ca-rotation"
	// PendingDir is where a server stages a rotation, in its pki.
	PendingDir = "rotate-ca-pending"
)

func recordKey(file string) string { return strings.ReplaceAll(file, "/", "_") }

func fileOf(key string) string { return strings.ReplaceAll(key, "_", "/") }

// Stage writes set as the cluster's record, replacing any rotation
// recorded before, and stages it in pkiDir at once (the servers stage it
// too, each in its own pki, as soon as they see it).
func Stage(ctx context.Context, client kubernetes.Interface, set Set, pkiDir string) error {
	data := map[string][]byte{}
	for f, b := range set.Files {
		data[recordKey(f)] = b
	}
	secrets := client.CoreV1().Secrets(metav1.NamespaceSystem)
	record, err := secrets.Get(ctx, RecordName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		record = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: RecordName, Namespace: metav1.NamespaceSystem},
			Type: RecordType, Data: data}
		_, err = secrets.Create(ctx, record, metav1.CreateOptions{})
	case err == nil:
		record.Data = data
		_, err = secrets.Update(ctx, record, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("the cluster's record of the CA rotation: %w", err)
	}
	return stage(pkiDir, set.Files)
}

// stage writes files into pkiDir's pending directory, unless every one of
// them is in place already (a rotation this server took).
func stage(pkiDir string, files map[string][]byte) error {
	inPlace := true
	for f, b := range files {
		if cur, err := os.ReadFile(filepath.Join(pkiDir, f)); err != nil || !bytes.Equal(cur, b) {
			inPlace = false
			break
		}
	}
	pending := filepath.Join(pkiDir, PendingDir)
	if inPlace {
		return os.RemoveAll(pending)
	}
	// Written whole, then renamed into place: a start finds a complete
	// rotation or none.
	tmp, err := os.MkdirTemp(pkiDir, "."+PendingDir+"-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for f, b := range files {
		path := filepath.Join(tmp, f)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		if err := pki.WriteFile(path, b, 0o600); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(pending); err != nil {
		return err
	}
	return os.Rename(tmp, pending)
}

// Sync stages the cluster's record in pkiDir whenever it changes, until
// ctx ends.
func Sync(ctx context.Context, client kubernetes.Interface, pkiDir string) {
	logger := klog.FromContext(ctx)
	write := func(record *corev1.Secret) {
		if record.Type != RecordType {
			return
		}
		files := map[string][]byte{}
		for k, b := range record.Data {
			files[fileOf(k)] = b
		}
		if err := stage(pkiDir, files); err != nil {
			logger.Error(err, "Staging the cluster's CA rotation", "dir", filepath.Join(pkiDir, PendingDir))
			return
		}
		if _, err := os.Stat(filepath.Join(pkiDir, PendingDir)); err == nil {
			logger.Info("The cluster's CAs were rotated: this server takes them at its next start", "files", slices.Sorted(maps.Keys(files)))
		}
	}
	clusterjoin.FollowSecret(ctx, client, RecordName, write)
}

// Apply takes a staged rotation, before a server reads its pki: the files
// it replaces go to pki/retired-<unix time>. The server then issues anew
// every leaf certificate the new CAs did not sign. It reports whether
// there was a rotation.
func Apply(pkiDir string, now time.Time) (bool, error) {
	pending := filepath.Join(pkiDir, PendingDir)
	var files []string
	err := filepath.WalkDir(pending, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(pending, path)
		files = append(files, rel)
		return err
	})
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	retired := filepath.Join(pkiDir, fmt.Sprintf("retired-%d", now.Unix()))
	for _, f := range files {
		to := filepath.Join(retired, f)
		if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
			return false, err
		}
		if err := os.Rename(filepath.Join(pkiDir, f), to); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
		if err := os.Rename(filepath.Join(pending, f), filepath.Join(pkiDir, f)); err != nil {
			return false, err
		}
	}
	return true, os.RemoveAll(pending)
}
