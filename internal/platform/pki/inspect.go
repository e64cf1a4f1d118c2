package pki

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Certificate is what Inspect tells of one certificate in a pki directory.
type Certificate struct {
	// Name is the file's name without .crt: apiserver, admin, ca, ...
	Name     string
	Subject  string
	IsCA     bool
	NotAfter time.Time
}

// Status is how a certificate stands at now: "ok", "expired", or for one
// within RenewBefore of its expiry "renews at start" (a leaf, issued anew
// the next time the server starts or checks its certificates) or
// "expires soon" (a CA, which is never renewed on its own).
func (c Certificate) Status(now time.Time) string {
	switch {
	case now.After(c.NotAfter):
		return "expired"
	case now.Add(RenewBefore).Before(c.NotAfter):
		return "ok"
	case c.IsCA:
		return "expires soon"
	}
	return "renews at start"
}

// Inspect lists the certificates in dir (the first of each file), by name.
func Inspect(dir string) ([]Certificate, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []Certificate
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".crt")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		certs, err := ParseCertificates(path, data)
		if err != nil {
			return nil, err
		}
		c := certs[0]
		out = append(out, Certificate{Name: name, Subject: c.Subject.String(), IsCA: c.IsCA, NotAfter: c.NotAfter})
	}
	slices.SortFunc(out, func(a, b Certificate) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Retire moves the named leaf certificates and their keys (all leaves when
// names is empty) out of dir, into dir/retired-<unix time>, so that they
// are issued anew: at the server's next start, or by a running server at
// its next check. CAs and the service account key are never retired.
// It returns the directory they went to.
func Retire(dir string, names []string, now time.Time) (string, error) {
	certs, err := Inspect(dir)
	if err != nil {
		return "", err
	}
	leaves := map[string]bool{}
	for _, c := range certs {
		if !c.IsCA {
			leaves[c.Name] = true
		}
	}
	if len(names) == 0 {
		for name := range leaves {
			names = append(names, name)
		}
		slices.Sort(names)
	}
	var unknown []string
	for _, name := range names {
		if !leaves[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		known := make([]string, 0, len(leaves))
		for name := range leaves {
			known = append(known, name)
		}
		slices.Sort(known)
		return "", fmt.Errorf("no leaf certificate %s in %s (there are: %s)", strings.Join(unknown, ", "), dir, strings.Join(known, ", "))
	}
	to := filepath.Join(dir, fmt.Sprintf("retired-%d", now.Unix()))
	if err := os.Mkdir(to, 0o700); err != nil {
		return "", err
	}
	for _, name := range names {
		for _, ext := range []string{".crt", ".key"} {
			if err := os.Rename(filepath.Join(dir, name+ext), filepath.Join(to, name+ext)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return "", err
			}
		}
	}
	return to, nil
}
