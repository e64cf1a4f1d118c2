package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
	// RenewBefore is how long before its expiry a leaf certificate is
	// issued anew (by the server, at start and while it runs), and a CA
	// is warned of: as k3s since v1.33.1, within 120 days.
	RenewBefore = 120 * 24 * time.Hour
	// clockSkew backdates certificates so that peers with a slightly slow
	// clock accept them at once.
	clockSkew = 5 * time.Minute
)

// KeyPair is a certificate with its private key, in parsed and PEM forms.
type KeyPair struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte
}

// EnsureCA loads the CA from dir/ca.crt and dir/ca.key, or creates it.
func EnsureCA(dir, commonName string) (*KeyPair, error) {
	return EnsureNamedCA(dir, CAName, commonName)
}

// EnsureNamedCA loads the CA from dir/<name>.crt and .key, or creates it.
func EnsureNamedCA(dir, name, commonName string) (*KeyPair, error) {
	certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := pairPresent(certPath, keyPath); err != nil {
		// A CA certificate without its key (or the reverse) is someone's
		// CA half copied: never replace it.
		return nil, err
	}
	kp, err := Load(certPath, keyPath)
	if err == nil {
		if !kp.Cert.IsCA {
			return nil, fmt.Errorf("%s is not a CA certificate", certPath)
		}
		return kp, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	kp, err = NewCA(commonName)
	if err != nil {
		return nil, err
	}
	return kp, kp.write(certPath, keyPath)
}

// NewCA makes a self-signed CA named commonName@<unix time>, as the CAs a
// server makes at its first start.
func NewCA(commonName string) (*KeyPair, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	tmpl := caTemplate(commonName)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	return newKeyPair(der, key)
}

// NewCrossSignedCA makes a CA to replace current without breaking trust:
// a new self-signed root, followed in its file by the same certificate
// (name and key) signed by current. A leaf it issues carries the second
// (sign), so that a peer that trusts only current verifies it too.
func NewCrossSignedCA(current *KeyPair, commonName string) (*KeyPair, error) {
	root, err := NewCA(commonName)
	if err != nil {
		return nil, err
	}
	cross := *root.Cert
	cross.SerialNumber = serial()
	cross.AuthorityKeyId = nil
	cross.SignatureAlgorithm = 0 // current's key decides
	if current.Cert.NotAfter.Before(cross.NotAfter) {
		// No certificate outlives its issuer.
		cross.NotAfter = current.Cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, &cross, current.Cert, root.Cert.PublicKey, current.Key)
	if err != nil {
		return nil, fmt.Errorf("cross-signing the CA certificate: %w", err)
	}
	root.CertPEM = append(root.CertPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	return root, nil
}

func caTemplate(commonName string) *x509.Certificate {
	now := time.Now()
	return &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", commonName, now.Unix())},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
}

// ServingSpec describes a serving certificate.
type ServingSpec struct {
	CommonName string
	DNSNames   []string
	IPs        []net.IP
	// ClientAuth makes it a client certificate too, as an etcd peer's,
	// which both serves and dials its peers.
	ClientAuth bool
}

// servingTemplate is a leaf for spec.
func servingTemplate(spec ServingSpec) *x509.Certificate {
	tmpl := leafTemplate(spec.CommonName, nil)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	if spec.ClientAuth {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	tmpl.DNSNames = spec.DNSNames
	tmpl.IPAddresses = spec.IPs
	return tmpl
}

// EnsureServing loads dir/<name>.crt and .key if they were signed by ca,
// cover every name and address in spec and are not about to expire;
// otherwise it issues a new pair.
func EnsureServing(dir, name string, ca *KeyPair, spec ServingSpec) (*KeyPair, error) {
	certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if kp, err := Load(certPath, keyPath); err == nil && usable(kp, ca) && covers(kp.Cert, spec) {
		return kp, nil
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return issue(ca, servingTemplate(spec), certPath, keyPath)
}

// EnsureClient loads dir/<name>.crt and .key if they were signed by ca for
// the same user and groups and are not about to expire; otherwise it issues
// a new client certificate.
func EnsureClient(dir, name string, ca *KeyPair, user string, groups []string) (*KeyPair, error) {
	certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if kp, err := Load(certPath, keyPath); err == nil && usable(kp, ca) &&
		kp.Cert.Subject.CommonName == user && slices.Equal(kp.Cert.Subject.Organization, groups) {
		return kp, nil
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	kp, err := NewClient(ca, user, groups)
	if err != nil {
		return nil, err
	}
	return kp, kp.write(certPath, keyPath)
}

// NewClient issues a client certificate signed by ca for user and groups
// without writing it anywhere (a test harness's extra users).
func NewClient(ca *KeyPair, user string, groups []string) (*KeyPair, error) {
	tmpl := leafTemplate(user, groups)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return sign(ca, tmpl)
}

// NewServing issues a serving certificate signed by ca without writing it
// anywhere (for the server's own loopback connections).
func NewServing(ca *KeyPair, spec ServingSpec) (*KeyPair, error) {
	return sign(ca, servingTemplate(spec))
}

// NewSelfSigned issues a serving certificate that signs itself (an
// ingress's default certificate, which no client is meant to trust).
func NewSelfSigned(spec ServingSpec) (*KeyPair, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	tmpl := servingTemplate(spec)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("creating certificate %s: %w", spec.CommonName, err)
	}
	return newKeyPair(der, key)
}

func leafTemplate(cn string, orgs []string) *x509.Certificate {
	now := time.Now()
	return &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(leafValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
	}
}

func issue(ca *KeyPair, tmpl *x509.Certificate, certPath, keyPath string) (*KeyPair, error) {
	kp, err := sign(ca, tmpl)
	if err != nil {
		return nil, err
	}
	return kp, kp.write(certPath, keyPath)
}

// sign issues tmpl from ca. The certificate file carries, after the leaf,
// the CA's certificates that are not self-signed (a CA cross-signed by the
// one before it, rotate-ca), so that a peer trusting only the CA before
// still verifies it.
func sign(ca *KeyPair, tmpl *x509.Certificate) (*KeyPair, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("signing certificate %s: %w", tmpl.Subject.CommonName, err)
	}
	kp, err := newKeyPair(der, key)
	if err != nil {
		return nil, err
	}
	kp.CertPEM = append(kp.CertPEM, ca.chain()...)
	return kp, nil
}

// chain is the PEM of the certificates of the CA's file that are not
// self-signed: none for a CA kubeboot made.
func (kp *KeyPair) chain() []byte {
	var out []byte
	for rest := kp.CertPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return out
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if b.Type != "CERTIFICATE" || err != nil || selfSigned(c) {
			continue
		}
		out = append(out, pem.EncodeToMemory(b)...)
	}
}

// selfSigned reports whether c is signed by its own key under its own
// name: a root.
func selfSigned(c *x509.Certificate) bool {
	return bytes.Equal(c.RawIssuer, c.RawSubject) && c.CheckSignatureFrom(c) == nil
}

// pairPresent reports an error when exactly one of a certificate and its
// key exists.
func pairPresent(certPath, keyPath string) error {
	_, certErr := os.Stat(certPath)
	_, keyErr := os.Stat(keyPath)
	switch {
	case certErr == nil && os.IsNotExist(keyErr):
		return fmt.Errorf("%s exists without %s: certificate and key must be supplied as a pair", certPath, keyPath)
	case keyErr == nil && os.IsNotExist(certErr):
		return fmt.Errorf("%s exists without %s: certificate and key must be supplied as a pair", keyPath, certPath)
	}
	return nil
}

// CAName is the name of the cluster CA's files in dir (ca.crt, ca.key).
const CAName = "ca"

// ServiceAccountKeyName is the name of the service account signing key
// in a data dir's pki directory: a key without a certificate.
const ServiceAccountKeyName = "sa"

// Check reports, without writing anything, whether the certificates in dir
// can be used: every certificate and key present parses, and comes with its
// pair (the service account signing key has none).
func Check(dir string) error {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".crt")
		if !ok {
			if n, isKey := strings.CutSuffix(e.Name(), ".key"); isKey && n == ServiceAccountKeyName {
				if _, err := readSigningKey(filepath.Join(dir, e.Name())); err != nil {
					return err
				}
			} else if isKey {
				if err := pairPresent(filepath.Join(dir, n+".crt"), filepath.Join(dir, e.Name())); err != nil {
					return err
				}
			}
			continue
		}
		certPath, keyPath := filepath.Join(dir, e.Name()), filepath.Join(dir, name+".key")
		if err := pairPresent(certPath, keyPath); err != nil {
			return err
		}
		if _, err := Load(certPath, keyPath); err != nil {
			return err
		}
	}
	return nil
}

// ParseCertificates returns the certificates of a PEM bundle, or an error
// naming path when it holds none or one does not parse.
func ParseCertificates(path string, data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return out, nil
}

// usable reports whether kp was signed by ca and is valid for a while.
func usable(kp, ca *KeyPair) bool {
	if time.Now().Add(RenewBefore).After(kp.Cert.NotAfter) {
		return false
	}
	return kp.Cert.CheckSignatureFrom(ca.Cert) == nil
}

func covers(c *x509.Certificate, spec ServingSpec) bool {
	if c.Subject.CommonName != spec.CommonName {
		return false
	}
	if spec.ClientAuth && !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		return false
	}
	for _, n := range spec.DNSNames {
		if !slices.Contains(c.DNSNames, n) {
			return false
		}
	}
	for _, ip := range spec.IPs {
		if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

func newKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating key: %w", err)
	}
	return k, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		// crypto/rand does not fail on supported platforms.
		panic(err)
	}
	return n
}

func newKeyPair(der []byte, key *ecdsa.PrivateKey) (*KeyPair, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &KeyPair{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func (kp *KeyPair) write(certPath, keyPath string) error {
	if err := WriteFile(keyPath, kp.KeyPEM, fileMode); err != nil {
		return err
	}
	return WriteFile(certPath, kp.CertPEM, fileMode)
}

// Load reads a PEM certificate and key; a missing file yields an error
// wrapping os.ErrNotExist.
func Load(certPath, keyPath string) (*KeyPair, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, err
	}
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM certificate", certPath)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certPath, err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, fmt.Errorf("%s: no PEM key", keyPath)
	}
	key, err := parseKey(kb)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyPath, err)
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, fmt.Errorf("%s does not match %s", keyPath, certPath)
	}
	return &KeyPair{Cert: cert, Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

func parseKey(b *pem.Block) (crypto.Signer, error) {
	switch b.Type {
	case "EC PRIVATE KEY":
		return x509.ParseECPrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		return x509.ParsePKCS1PrivateKey(b.Bytes)
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
		if err != nil {
			return nil, err
		}
		if s, ok := k.(crypto.Signer); ok {
			return s, nil
		}
	}
	return nil, fmt.Errorf("unsupported private key type %q", b.Type)
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	ea, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ea.Equal(b)
}

// fileMode is every pki file's: certificates too, as the CIS Kubernetes
// Benchmark asks (1.1.20, 1.1.21).
const fileMode os.FileMode = 0o600

// TightenModes makes dir 0700 and every file in it 0600, whatever modes an
// earlier version or a user left them with.
func TightenModes(dir string) error {
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			if err := os.Chmod(filepath.Join(dir, e.Name()), fileMode); err != nil {
				return err
			}
		}
	}
	return nil
}

// WriteFile writes data atomically (temporary file, then rename) with the
// given mode, so a crash never leaves a half-written key or kubeconfig.
func WriteFile(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return os.Chmod(path, mode)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// EnsureSigningKey returns the path of dir/<name>.key, a private key that
// signs tokens (the service account signing key), generating it (ECDSA
// P-256, 0600) on first use and reusing it after, so tokens stay valid
// across restarts.
func EnsureSigningKey(dir, name string) (string, error) {
	path := filepath.Join(dir, name+".key")
	if _, err := readSigningKey(path); err == nil {
		return path, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	key, err := NewSigningKey()
	if err != nil {
		return "", err
	}
	if err := WriteFile(path, key, 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// WriteCertificate writes c alone to path (0600, its directory 0700),
// unless path holds it already.
func WriteCertificate(path string, c *x509.Certificate) error {
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return WriteFile(path, data, fileMode)
}

// NewSigningKey returns a new private key, PEM (ECDSA P-256), for signing
// tokens.
func NewSigningKey() ([]byte, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// readSigningKey reads a PEM private key.
func readSigningKey(path string) (crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, fmt.Errorf("%s: no PEM private key", path)
	}
	key, err := parseKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return key, nil
}
