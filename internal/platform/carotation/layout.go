// Package carotation replaces a cluster's CAs and its service account key
// (`kubeboot certificate rotate-ca`, k3s's command): it reads them in k3s's
// layout of files, checks them against those in use, keeps them in the
// cluster's record for every server, and a server takes them at its next
// start.
package carotation

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/util/keyutil"

	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// authority is a CA of kubeboot's pki and the k3s files that give it.
// kubeboot signs servers and clients with one cluster CA where k3s has a
// server CA and a client CA, and etcd's peers with one CA where k3s has a
// peer CA and a server CA (kubeboot's etcd serves no client over TLS):
// k3s's pair must then be one certificate and key.
type authority struct {
	// name is the CA's files in pki, without .crt and .key.
	name string
	// k3s are the names of k3s's files under tls/, without .crt and .key.
	k3s []string
}

var authorities = []authority{
	{name: pki.CAName, k3s: []string{"server-ca", "client-ca"}},
	{name: "front-proxy-ca", k3s: []string{"request-header-ca"}},
	{name: "etcd/" + pki.CAName, k3s: []string{"etcd/server-ca", "etcd/peer-ca"}},
}

// k3sServiceKey is k3s's service account key file under tls/.
const k3sServiceKey = "service.key"

// serviceKey is kubeboot's, in pki.
var serviceKey = pki.ServiceAccountKeyName + ".key"

// Set is a rotation: the files, by their paths relative to a server's pki
// directory, with their contents as the servers write them.
type Set struct {
	Files map[string][]byte
}

// Read reads the CAs and the service account key in k3s's layout from
// dir's tls directory (or dir itself when it has none), checks them
// against the files in use in pkiDir, and returns the files to write. A CA
// not in dir stays as it is (a note says so). Unless force, a new CA must
// be signed by the CA it replaces (cross-signed, or the same key): its
// file then keeps the current CA's certificates after the new ones, so
// that certificates issued before stay trusted; and the new service.key
// must hold the current key, so that tokens issued before stay valid.
// With force, the notes say what stops working.
func Read(dir, pkiDir string, force bool) (Set, []string, error) {
	if fi, err := os.Stat(filepath.Join(dir, "tls")); err == nil && fi.IsDir() {
		dir = filepath.Join(dir, "tls")
	} else if _, err := os.Stat(dir); err != nil {
		return Set{}, nil, err
	}
	set := Set{Files: map[string][]byte{}}
	var notes []string
	for _, a := range authorities {
		ca, from, err := readAuthority(dir, a)
		if err != nil {
			return Set{}, nil, err
		}
		_, statErr := os.Stat(filepath.Join(pkiDir, a.name+".crt"))
		switch {
		case errors.Is(statErr, fs.ErrNotExist) && a.name != pki.CAName:
			// The etcd CA of a server that is no member of a cluster.
			if ca != nil {
				notes = append(notes, fmt.Sprintf("%s is not used: this server has no %s", from, a.name))
			}
			continue
		case ca == nil:
			notes = append(notes, fmt.Sprintf("no %s.crt in %s: %s is not changed", strings.Join(a.k3s, ".crt or "), dir, a.name))
			continue
		}
		certPEM, note, err := a.check(ca, from, pkiDir, force)
		if err != nil {
			return Set{}, nil, err
		}
		if note != "" {
			notes = append(notes, note)
		}
		set.Files[a.name+".crt"], set.Files[a.name+".key"] = certPEM, ca.KeyPEM
	}
	key, note, err := readServiceKey(dir, pkiDir, force)
	if err != nil {
		return Set{}, nil, err
	}
	if note != "" {
		notes = append(notes, note)
	}
	if key != nil {
		set.Files[serviceKey] = key
	}
	if len(set.Files) == 0 {
		return Set{}, notes, fmt.Errorf("%s holds none of k3s's CA files (server-ca, client-ca, request-header-ca, etcd/server-ca, etcd/peer-ca, service.key)", dir)
	}
	return set, notes, nil
}

// readAuthority loads a's k3s files in dir: nil if there are none. Two
// files for one kubeboot CA must be the same CA.
func readAuthority(dir string, a authority) (*pki.KeyPair, string, error) {
	var ca *pki.KeyPair
	var from string
	for _, name := range a.k3s {
		certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
		kp, err := pki.Load(certPath, keyPath)
		if errors.Is(err, fs.ErrNotExist) {
			if _, statErr := os.Stat(certPath); statErr == nil {
				return nil, "", fmt.Errorf("%s has no key %s: a CA is rotated with its key", certPath, keyPath)
			}
			continue
		}
		if err != nil {
			return nil, "", err
		}
		if !kp.Cert.IsCA {
			return nil, "", fmt.Errorf("%s is not a CA certificate", certPath)
		}
		if ca != nil && !kp.Cert.Equal(ca.Cert) {
			return nil, "", fmt.Errorf("%s and %s are different CAs; kubeboot's %s signs both kinds of certificates: give one CA, as both files or one of them", from, certPath, a.name)
		}
		if ca == nil {
			ca, from = kp, certPath
		}
	}
	return ca, from, nil
}

// check checks the new CA against the one in use and returns its file's
// contents, and a note when force overrode the check.
func (a authority) check(ca *pki.KeyPair, from, pkiDir string, force bool) ([]byte, string, error) {
	currentPath := filepath.Join(pkiDir, a.name+".crt")
	data, err := os.ReadFile(currentPath)
	if err != nil {
		return nil, "", fmt.Errorf("the %s in use: %w", a.name, err)
	}
	current, err := pki.ParseCertificates(currentPath, data)
	if err != nil {
		return nil, "", err
	}
	newCerts, err := pki.ParseCertificates(from, ca.CertPEM)
	if err != nil {
		return nil, "", err
	}
	// What a peer that trusts only the current CA will do with the new
	// one's certificates: verify one, through the certificates its file
	// carries after it (pki's chain).
	probe, err := pki.NewClient(ca, "kubeboot-rotate-ca-probe", nil)
	if err != nil {
		return nil, "", err
	}
	chain, err := pki.ParseCertificates(from, probe.CertPEM)
	if err != nil {
		return nil, "", err
	}
	roots, intermediates := x509.NewCertPool(), x509.NewCertPool()
	for _, c := range current {
		roots.AddCert(c)
	}
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	_, verr := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	switch {
	case verr == nil:
		// Trust continues: the certificates issued by the current CA stay
		// trusted beside the new ones.
		out := bytes.Clone(ca.CertPEM)
		for _, c := range current {
			if !containsCert(newCerts, c) {
				out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
			}
		}
		return out, "", nil
	case !force:
		return nil, "", fmt.Errorf("%s is not signed by the %s in use (%s): %w; cross-sign the new CA with the current one (kubeboot certificate generate-ca does), or give --force to replace it regardless", from, a.name, current[0].Subject, verr)
	}
	return ca.CertPEM, fmt.Sprintf("--force: %s replaces %s without a chain of trust: nodes, kubeconfigs and Pods that trust only the current CA will refuse the servers once they restart, and every certificate it issued is refused; agents must join again with the new token", from, a.name), nil
}

func containsCert(certs []*x509.Certificate, c *x509.Certificate) bool {
	for _, x := range certs {
		if x.Equal(c) {
			return true
		}
	}
	return false
}

// readServiceKey reads dir/service.key: nil if there is none. Unless
// force, it must hold the key in use (beside the new one, which signs).
func readServiceKey(dir, pkiDir string, force bool) ([]byte, string, error) {
	path := filepath.Join(dir, k3sServiceKey)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Sprintf("no %s in %s: the service account key is not changed", k3sServiceKey, dir), nil
	} else if err != nil {
		return nil, "", err
	}
	if _, err := keyutil.ParsePrivateKeyPEM(data); err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	keys, err := keyutil.ParsePublicKeysPEM(data)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	currentPath := filepath.Join(pkiDir, serviceKey)
	current, err := keyutil.PublicKeysFromFile(currentPath)
	if err != nil {
		return nil, "", fmt.Errorf("the service account key in use: %w", err)
	}
	for _, k := range keys {
		if eq, ok := k.(interface{ Equal(crypto.PublicKey) bool }); ok && eq.Equal(current[0]) {
			return data, "", nil
		}
	}
	if !force {
		return nil, "", fmt.Errorf("%s does not hold the service account key in use (%s): every service account token issued so far would be refused; append the current key after the new one, or give --force", path, currentPath)
	}
	return data, fmt.Sprintf("--force: %s drops the service account key in use: every service account token issued so far is refused", path), nil
}
