// Package envtest is controller-runtime's envtest on kubeboot: the same
// Environment, with the fields envtest users already write, that starts a
// real kube-apiserver assembly with embedded etcd inside the test process.
// Switching a suite is an import change:
//
//	import "sigs.k8s.io/controller-runtime/pkg/envtest"
//
// becomes
//
//	import "github.com/kubeboot/kubeboot/kubeboottest/envtest"
//
// and there is nothing to download: no setup-envtest, no
// KUBEBUILDER_ASSETS, no processes left behind. CRDs (CRDDirectoryPaths,
// CRDs, CRDInstallOptions) are installed, established and in discovery
// when Start returns; webhooks (WebhookInstallOptions, controller-runtime's
// fields) are installed as envtest does, with generated serving
// certificates, and CRD conversion webhooks point at the same local
// server. Beyond envtest, Environment runs kube-controller-manager's
// controllers on request (Controllers), so cascading deletion and
// namespace deletion finish, and Reset returns the server to how Start
// left it in milliseconds.
package envtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/kubeboottest"
)

// CRDInstallOptions are envtest's options for installing CRDs, field for
// field. MaxTime and PollInterval are unused: Start waits, within
// ControlPlaneStartTimeout, until the CRDs are established and in
// discovery. CleanUpAfterUse needs nothing: the CRDs go with the server.
type CRDInstallOptions struct {
	// Scheme decides which CRDs get a conversion webhook; default: the
	// Environment's.
	Scheme *runtime.Scheme
	// Paths are files or directories of CRD manifests.
	Paths []string
	// CRDs are CRDs to install.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// ErrorIfPathMissing makes a missing path an error.
	ErrorIfPathMissing bool
	MaxTime            time.Duration
	PollInterval       time.Duration
	CleanUpAfterUse    bool
	// WebhookOptions is envtest's; the Environment's WebhookInstallOptions
	// configure conversion webhooks.
	WebhookOptions WebhookInstallOptions
}

// User is a user to provision (AddUser).
type User struct {
	// Name is the user name.
	Name string
	// Groups are the groups it belongs to.
	Groups []string
}

// attachOutputEnv is envtest's switch for AttachControlPlaneOutput.
const attachOutputEnv = "KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT"

// Environment is a kubeboot control plane for a test suite, in the test's
// process. Fields are envtest's; those about binaries are accepted and
// unused, since nothing is downloaded or executed.
type Environment struct {
	// Scheme decides which CRDs get a conversion webhook: those whose kind
	// it knows as convertible (a Hub and its spokes), as envtest. Default:
	// client-go's scheme.Scheme.
	Scheme *runtime.Scheme

	// Config is an admin (system:masters) client config, set by Start.
	// Unlike envtest, a Config set before Start does not select an
	// existing cluster: UseExistingCluster is not supported.
	Config *rest.Config
	// KubeConfig is Config as a kubeconfig file's contents, set by Start.
	KubeConfig []byte

	// CRDInstallOptions are the options for installing CRDs; Paths and
	// CRDs are merged with CRDDirectoryPaths and CRDs.
	CRDInstallOptions CRDInstallOptions
	// WebhookInstallOptions are the options for installing webhooks.
	WebhookInstallOptions WebhookInstallOptions
	// ErrorIfCRDPathMissing makes a missing CRD path an error rather than
	// skipped.
	ErrorIfCRDPathMissing bool
	// CRDs are CRDs to install. After Start it holds every CRD installed.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// CRDDirectoryPaths are files or directories of CRD manifests (.yaml,
	// .yml, .json); documents of other kinds are skipped.
	CRDDirectoryPaths []string

	// UseExistingCluster is envtest's; true is refused by Start (point
	// controller-runtime's envtest at an existing cluster instead).
	UseExistingCluster *bool
	// ControlPlaneStartTimeout bounds Start's wait for the server, CRDs
	// and webhooks. Default: one minute.
	ControlPlaneStartTimeout time.Duration
	// ControlPlaneStopTimeout is accepted for compatibility: Stop drains
	// the in-process server in well under a second.
	ControlPlaneStopTimeout time.Duration
	// AttachControlPlaneOutput, or KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT
	// =true, shows the control plane's logs on stderr. The server runs in
	// the test's process and logs through klog, the process's own: when
	// false, Start sends klog's output nowhere, for the whole test binary.
	AttachControlPlaneOutput bool

	// BinaryAssetsDirectory, DownloadBinaryAssets,
	// DownloadBinaryAssetsVersion and DownloadBinaryAssetsIndexURL are
	// envtest's, accepted so its suites compile unchanged, and unused:
	// kubeboot needs no binaries.
	BinaryAssetsDirectory        string
	DownloadBinaryAssets         bool
	DownloadBinaryAssetsVersion  string
	DownloadBinaryAssetsIndexURL string

	// Controllers are kube-controller-manager controllers to run in the
	// process, by name or alias as its --controllers flag takes them:
	// "garbagecollector" for cascading deletion, "namespace" for
	// namespaces that finish deleting, "*" for all of its defaults.
	// kubeboot's, not envtest's. Default: none.
	Controllers []string
	// Server is the kubeboot test server, set by Start: Reset, Checkpoint,
	// UserConfig, DataDir.
	Server *kubeboottest.Server

	dir string // the server's data and the webhook certificates
}

// Start starts the control plane, installs the CRDs and webhooks, and
// returns an admin client config (also in Config). On error nothing is
// left running.
func (te *Environment) Start() (_ *rest.Config, err error) {
	if te.UseExistingCluster != nil && *te.UseExistingCluster {
		return nil, errors.New("envtest: UseExistingCluster is not supported by kubeboot's envtest; use controller-runtime's envtest for an existing cluster")
	}
	if te.Server != nil {
		return nil, errors.New("envtest: Start called twice")
	}
	timeout := te.ControlPlaneStartTimeout
	if timeout == 0 {
		timeout = kubeboottest.DefaultStartTimeout
	}
	te.setUpLogging()
	if te.Scheme == nil {
		te.Scheme = scheme.Scheme
	}

	// Read every CRD first: a bad file fails Start before a server runs.
	crds, err := te.loadCRDs()
	if err != nil {
		return nil, fmt.Errorf("envtest: %w", err)
	}
	// One directory for the server's data and the webhook certificates:
	// Stop removes it, or the next server started after this process is
	// gone.
	dir, err := kubeboottest.NewTempDir()
	if err != nil {
		return nil, fmt.Errorf("envtest: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	hooks := &te.WebhookInstallOptions
	if hooks.LocalServingCertDir == "" {
		hooks.LocalServingCertDir = filepath.Join(dir, "webhook-serving-certs")
	}
	// Certificates, host and port first: conversion webhooks point there
	// too.
	if err := hooks.PrepWithoutInstalling(); err != nil {
		return nil, fmt.Errorf("envtest: preparing webhooks: %w", err)
	}
	convertible := te.Scheme
	if te.CRDInstallOptions.Scheme != nil {
		convertible = te.CRDInstallOptions.Scheme
	}
	if err := pointConversionWebhooks(crds, convertible, hooks); err != nil {
		return nil, fmt.Errorf("envtest: %w", err)
	}
	// The server installs the CRDs before it is ready and before its
	// controllers start, so the garbage collector's first discovery finds
	// them (it rediscovers only every 30 s).
	// The webhook configurations are installed before Start records the
	// fresh state Reset returns to; the CRDs already are.
	srv, err := kubeboottest.StartServer(kubeboottest.Options{
		DataDir:      filepath.Join(dir, "server"),
		Controllers:  te.Controllers,
		StartTimeout: timeout,
		Configure: func(c *controlplane.Config) {
			c.CRDs = crds
			// As controller-runtime's envtest starts kube-apiserver:
			// --disable-admission-plugins=ServiceAccount, since without
			// the controller manager no namespace gets the default
			// account the plugin requires of every Pod. Its other
			// defaults (--allow-privileged, the 10.0.0.0/24 range, RBAC)
			// are kubeboottest's already.
			c.Admission.GenericAdmission.DisablePlugins = append(c.Admission.GenericAdmission.DisablePlugins, "ServiceAccount")
		},
		Setup: func(_ context.Context, srv *kubeboottest.Server) error {
			if err := te.WebhookInstallOptions.Install(srv.Config); err != nil {
				return fmt.Errorf("installing webhooks: %w", err)
			}
			return nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("envtest: starting the control plane: %w", err)
	}
	defer func() {
		if err != nil {
			_ = srv.Stop()
			te.Server, te.Config = nil, nil
		}
	}()
	te.Server, te.Config, te.dir = srv, srv.Config, dir
	if te.KubeConfig, err = os.ReadFile(srv.Kubeconfig); err != nil {
		return nil, fmt.Errorf("envtest: %w", err)
	}
	te.CRDs = make([]*apiextensionsv1.CustomResourceDefinition, len(crds))
	for i, crd := range crds {
		te.CRDs[i] = crd.CustomResourceDefinition
	}
	return te.Config, nil
}

// Stop stops the control plane and removes its data and the webhook
// certificates. Stopping an Environment that is not running does nothing.
// CRDInstallOptions.CleanUpAfterUse needs nothing more: the CRDs go with
// the server.
func (te *Environment) Stop() error {
	if te.Server == nil {
		return nil
	}
	err := te.Server.Stop()
	te.Server = nil
	return errors.Join(err, te.WebhookInstallOptions.Cleanup(), os.RemoveAll(te.dir))
}

// Reset returns the control plane to how Start left it: every object
// created since is deleted (namespaces and their contents, custom
// resources, ...) and every object changed or deleted since is written
// back; the CRDs and webhook configurations Start installed stay. See
// kubeboottest.Server.Reset.
func (te *Environment) Reset(ctx context.Context) error {
	if te.Server == nil {
		return errors.New("envtest: Reset before Start")
	}
	return te.Server.Reset(ctx)
}

// AuthenticatedUser is a user provisioned by AddUser.
type AuthenticatedUser struct {
	// User is who it authenticates as.
	User User
	cfg  *rest.Config
}

// Config returns a client config that authenticates as the user.
func (u *AuthenticatedUser) Config() *rest.Config { return rest.CopyConfig(u.cfg) }

// AddUser provisions a user: a client certificate for user.Name in
// user.Groups, signed by the server's CA. baseConfig's settings other than
// the server and credentials (QPS, timeouts, ...) are kept.
func (te *Environment) AddUser(user User, baseConfig *rest.Config) (*AuthenticatedUser, error) {
	if te.Server == nil {
		return nil, errors.New("envtest: AddUser before Start")
	}
	cfg, err := te.Server.UserConfig(user.Name, user.Groups...)
	if err != nil {
		return nil, fmt.Errorf("envtest: %w", err)
	}
	if baseConfig != nil {
		base := rest.CopyConfig(baseConfig)
		base.Host, base.TLSClientConfig = cfg.Host, cfg.TLSClientConfig
		base.BearerToken, base.BearerTokenFile, base.Username, base.Password = "", "", "", ""
		base.ExecProvider, base.AuthProvider = nil, nil
		cfg = base
	}
	return &AuthenticatedUser{User: user, cfg: cfg}, nil
}

// silenceKlog is done once per process: klog's settings are global, and
// Environments may start in parallel.
var silenceKlog sync.Once

func (te *Environment) setUpLogging() {
	if os.Getenv(attachOutputEnv) == "true" {
		te.AttachControlPlaneOutput = true
	}
	if te.AttachControlPlaneOutput {
		return
	}
	silenceKlog.Do(func() {
		// Errors too: klog copies them to stderr unless the threshold
		// is above them.
		fs := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(fs)
		_ = fs.Set("stderrthreshold", "FATAL")
		klog.LogToStderr(false)
		klog.SetOutput(io.Discard)
	})
}
