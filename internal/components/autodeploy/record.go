package autodeploy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// A record's data: the file's name, the checksum of its content last
// applied, the objects it held then (JSON, refs), and the server whose
// directory it was in (its advertise address).
const (
	keyFile     = "file"
	keyChecksum = "checksum"
	keyObjects  = "objects"
	keyServer   = "server"
)

// fileRecord is what a file applied, kept in a ConfigMap.
type fileRecord struct {
	cm       *corev1.ConfigMap
	file     string
	checksum string
	objects  []ref
	server   string
}

// ref names an object a file applied.
type ref struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

func (r ref) String() string {
	if r.Namespace == "" {
		return fmt.Sprintf("%s %s", r.Kind, r.Name)
	}
	return fmt.Sprintf("%s %s/%s", r.Kind, r.Namespace, r.Name)
}

// notAlphanumeric are the runs of characters of a file's name that are
// not lower-case letters or digits.
var notAlphanumeric = regexp.MustCompile(`[^a-z0-9]+`)

// recordName is the name of file's record: manifest-<file>, or where that
// is no valid name, the file's name in letters, digits and dashes with a
// hash of it.
func recordName(file string) string {
	if name := "manifest-" + file; len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	name := strings.Trim(notAlphanumeric.ReplaceAllString(strings.ToLower(file), "-"), "-")
	sum := sha256.Sum256([]byte(file))
	return fmt.Sprintf("manifest-%.200s-%s", name, hex.EncodeToString(sum[:4]))
}

// recordOf reads a record from its ConfigMap.
func recordOf(cm *corev1.ConfigMap) (*fileRecord, error) {
	r := &fileRecord{cm: cm, file: cm.Data[keyFile], checksum: cm.Data[keyChecksum], server: cm.Data[keyServer]}
	if objects := cm.Data[keyObjects]; objects != "" {
		if err := json.Unmarshal([]byte(objects), &r.objects); err != nil {
			return nil, fmt.Errorf("record %s/%s: %w", cm.Namespace, cm.Name, err)
		}
	}
	return r, nil
}

// records are every file's record.
func (a *applier) records(ctx context.Context) ([]*fileRecord, error) {
	list, err := a.client.CoreV1().ConfigMaps(Namespace).List(ctx, metav1.ListOptions{LabelSelector: FileLabel})
	if err != nil {
		return nil, err
	}
	var records []*fileRecord
	for i := range list.Items {
		r, err := recordOf(&list.Items[i])
		if err != nil {
			return nil, err
		}
		records = append(records, r)
	}
	return records, nil
}

// record is file's record, nil if it has none.
func (a *applier) record(ctx context.Context, file string) (*fileRecord, error) {
	cm, err := a.client.CoreV1().ConfigMaps(Namespace).Get(ctx, recordName(file), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return recordOf(cm)
}

// save writes r, creating its ConfigMap if it has none yet.
func (a *applier) save(ctx context.Context, r *fileRecord) error {
	objects, err := json.Marshal(r.objects)
	if err != nil {
		return err
	}
	cm := r.cm
	if cm == nil {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: recordName(r.file), Labels: map[string]string{FileLabel: ""}}}
	} else {
		cm = cm.DeepCopy()
	}
	cm.Data = map[string]string{keyFile: r.file, keyChecksum: r.checksum, keyObjects: string(objects), keyServer: r.server}
	if r.cm == nil {
		cm, err = a.client.CoreV1().ConfigMaps(Namespace).Create(ctx, cm, metav1.CreateOptions{})
	} else {
		cm, err = a.client.CoreV1().ConfigMaps(Namespace).Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("record of %s: %w", r.file, err)
	}
	r.cm = cm
	return nil
}

// checksum is the hex SHA-256 of a file's content.
func checksum(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
