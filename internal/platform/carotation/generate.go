package carotation

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// Generate writes into dir/tls, in k3s's layout, a new CA for each CA in
// pkiDir, cross-signed by it (pki.NewCrossSignedCA), under the first of
// its k3s names, and service.key: a new key followed by the current one.
// Read then accepts them without force. It returns the files written, and
// writes none if dir/tls holds any of them already.
func Generate(pkiDir, dir string) ([]string, error) {
	tls := filepath.Join(dir, "tls")
	files := map[string][]byte{}
	var names []string
	for _, a := range authorities {
		current, err := pki.Load(filepath.Join(pkiDir, a.name+".crt"), filepath.Join(pkiDir, a.name+".key"))
		if errors.Is(err, fs.ErrNotExist) && a.name != pki.CAName {
			continue // the etcd CA of a server on external etcd
		} else if err != nil {
			return nil, fmt.Errorf("the %s in use: %w", a.name, err)
		}
		next, err := pki.NewCrossSignedCA(current, "kubeboot-"+filepath.Base(a.k3s[0]))
		if err != nil {
			return nil, err
		}
		files[a.k3s[0]+".crt"], files[a.k3s[0]+".key"] = next.CertPEM, next.KeyPEM
		names = append(names, a.k3s[0]+".crt", a.k3s[0]+".key")
	}
	current, err := os.ReadFile(filepath.Join(pkiDir, serviceKey))
	if err != nil {
		return nil, fmt.Errorf("the service account key in use: %w", err)
	}
	key, err := pki.NewSigningKey()
	if err != nil {
		return nil, err
	}
	files[k3sServiceKey] = append(key, current...)
	names = append(names, k3sServiceKey)
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(tls, n)); err == nil {
			return nil, fmt.Errorf("%s exists: generate-ca writes into a directory of its own", filepath.Join(tls, n))
		}
	}
	for _, n := range names {
		path := filepath.Join(tls, n)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		if err := pki.WriteFile(path, files[n], 0o600); err != nil {
			return nil, err
		}
	}
	return names, nil
}
