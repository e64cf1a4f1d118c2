package controlplane

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"k8s.io/apiserver/pkg/audit/policy"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/kubeboot/kubeboot/internal/platform/auditpolicy"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
)

// The checks Complete makes of files and values that the option groups
// only read or parse when the server is built (their ApplyTo): a
// malformed certificate, key, TLS setting or audit policy is refused
// before anything starts or is written, naming its flag.

// checkKeyPair checks that a certificate and its key are both set and
// load as a pair.
func checkKeyPair(certFlag, keyFlag string, ck genericoptions.CertKey) []error {
	switch {
	case ck.CertFile == "":
		return []error{fmt.Errorf("%s is set without %s", keyFlag, certFlag)}
	case ck.KeyFile == "":
		return []error{fmt.Errorf("%s is set without %s", certFlag, keyFlag)}
	}
	if _, err := tls.LoadX509KeyPair(ck.CertFile, ck.KeyFile); err != nil {
		return []error{fmt.Errorf("%s %s, %s %s: %w", certFlag, ck.CertFile, keyFlag, ck.KeyFile, err)}
	}
	return nil
}

// checkTLS checks the serving group's TLS settings as its ApplyTo will
// parse them, and its SNI certificates.
func checkTLS(s *genericoptions.SecureServingOptions) []error {
	var errs []error
	if _, err := cliflag.TLSVersion(s.MinTLSVersion); err != nil {
		errs = append(errs, fmt.Errorf("--tls-min-version: %w", err))
	}
	if _, err := cliflag.TLSCipherSuites(s.CipherSuites); err != nil {
		errs = append(errs, fmt.Errorf("--tls-cipher-suites: %w", err))
	}
	if _, err := cliflag.TLSCurvePreferences(s.CurvePreferences); err != nil {
		errs = append(errs, fmt.Errorf("--tls-curve-preferences: %w", err))
	}
	for _, sni := range s.SNICertKeys {
		errs = append(errs, checkKeyPair("--tls-sni-cert-key", "--tls-sni-cert-key", genericoptions.CertKey{CertFile: sni.CertFile, KeyFile: sni.KeyFile})...)
	}
	return errs
}

// completeAudit resolves DefaultAudit into a copy of the audit group, and
// checks the group and loads its policy, which kube-apiserver reads only
// when it builds its backends.
func (cc *completedConfig) completeAudit() []error {
	audit := *cc.Audit
	cc.Audit = &audit
	if cc.DefaultAudit {
		if audit.PolicyFile == "" {
			audit.PolicyFile = auditpolicy.PolicyPath(cc.DataDir)
			cc.defaultAuditPolicy = true
		}
		if audit.LogOptions.Path == "" && audit.WebhookOptions.ConfigFile == "" {
			audit.LogOptions.Path = auditpolicy.LogPath(cc.DataDir)
		}
	}
	errs := audit.Validate()
	switch _, statErr := os.Stat(audit.PolicyFile); {
	case cc.defaultAuditPolicy && statErr != nil:
		// New writes kubeboot's policy there; a data dir it cannot write
		// to is refused on its own, as --data-dir.
	case audit.PolicyFile != "":
		flag := "--audit-policy-file"
		if cc.defaultAuditPolicy {
			flag = "the audit policy in --data-dir (default --audit-policy-file)"
		}
		if _, err := policy.LoadPolicyFromFile(audit.PolicyFile); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", flag, err))
		}
	case audit.LogOptions.Path != "" || audit.WebhookOptions.ConfigFile != "":
		// As kube-apiserver, which logs it.
		cc.warnings = append(cc.warnings, "--audit-log-path and --audit-webhook-config-file record no events without --audit-policy-file")
	}
	return errs
}

// checkCAs refuses a data dir whose CA has expired (nothing it signed
// would be trusted, and the server could not reach itself) and warns of
// one within pki.RenewBefore of its expiry: CAs are never renewed on
// their own.
func (cc *completedConfig) checkCAs() []error {
	certs, err := pki.Inspect(PKIDirIn(cc.DataDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return []error{fmt.Errorf("--data-dir %s: %w", cc.DataDir, err)}
	}
	now := time.Now()
	var errs []error
	for _, c := range certs {
		if !c.IsCA {
			continue
		}
		switch c.Status(now) {
		case "expired":
			errs = append(errs, fmt.Errorf("--data-dir %s: the CA pki/%s.crt (%s) expired on %s: the cluster's certificates are no longer trusted; a new CA means new certificates for every client and node",
				cc.DataDir, c.Name, c.Subject, c.NotAfter.UTC().Format(time.DateOnly)))
		case "expires soon":
			cc.warnings = append(cc.warnings, fmt.Sprintf("the CA pki/%s.crt (%s) expires on %s, in %d days: CAs are not renewed on their own (kubeboot certificate check)",
				c.Name, c.Subject, c.NotAfter.UTC().Format(time.DateOnly), int(c.NotAfter.Sub(now).Hours()/24)))
		}
	}
	return errs
}
