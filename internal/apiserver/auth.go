package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	apiserverapi "k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/union"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/keyutil"
	controlplaneadmission "k8s.io/kubernetes/pkg/controlplane/apiserver/admission"
	"k8s.io/kubernetes/pkg/controlplane/controller/clusterauthenticationtrust"
	kubeadmission "k8s.io/kubernetes/pkg/kubeapiserver/admission"
	kubeoptions "k8s.io/kubernetes/pkg/kubeapiserver/options"
	"k8s.io/kubernetes/pkg/serviceaccount"
)

// DefaultServiceAccountIssuer is the issuer of service account tokens when
// none is configured (--service-account-issuer), as kubeadm sets it.
const DefaultServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// anonymousPaths are the only paths an unauthenticated request may reach
// unless anonymous authentication is switched on: what kube-apiserver's
// default RBAC lets system:unauthenticated read anyway
// (system:public-info-viewer).
var anonymousPaths = []string{"/healthz", "/livez", "/readyz", "/version"}

// ServiceAccounts configures service account tokens: issuing
// (TokenRequest) and authenticating them.
type ServiceAccounts struct {
	// Authentication is kube-apiserver's option group: issuers (the first
	// issues tokens), verification key files, lookup, expiration.
	// Issuers default to DefaultServiceAccountIssuer, KeyFiles to
	// SigningKeyFile.
	Authentication *kubeoptions.ServiceAccountAuthenticationOptions
	// SigningKeyFile is --service-account-signing-key-file: the private
	// key that signs tokens. Required.
	SigningKeyFile string
}

// serviceAccountTokens is ServiceAccounts made live.
type serviceAccountTokens struct {
	options       *kubeoptions.ServiceAccountAuthenticationOptions
	issuer        serviceaccount.TokenGenerator
	issuerURL     string
	maxExpiration time.Duration
	publicKeys    serviceaccount.PublicKeysGetter
}

func newServiceAccountTokens(c ServiceAccounts) (*serviceAccountTokens, error) {
	if c.SigningKeyFile == "" {
		return nil, errors.New("a service account signing key file is required")
	}
	o := kubeoptions.NewBuiltInAuthenticationOptions().WithServiceAccounts().ServiceAccounts
	if c.Authentication != nil {
		copied := *c.Authentication
		o = &copied
	}
	if len(o.Issuers) == 0 {
		o.Issuers = []string{DefaultServiceAccountIssuer}
	}
	if len(o.KeyFiles) == 0 {
		o.KeyFiles = []string{c.SigningKeyFile}
	}
	key, err := keyutil.PrivateKeyFromFile(c.SigningKeyFile)
	if err != nil {
		return nil, fmt.Errorf("service account signing key %s: %w", c.SigningKeyFile, err)
	}
	issuer, err := serviceaccount.JWTTokenGenerator(o.Issuers[0], key)
	if err != nil {
		return nil, fmt.Errorf("service account signing key %s: %w", c.SigningKeyFile, err)
	}
	var public []any
	for _, f := range o.KeyFiles {
		keys, err := keyutil.PublicKeysFromFile(f)
		if err != nil {
			return nil, fmt.Errorf("service account key file %s: %w", f, err)
		}
		public = append(public, keys...)
	}
	getter, err := serviceaccount.StaticPublicKeysGetter(public)
	if err != nil {
		return nil, fmt.Errorf("service account keys: %w", err)
	}
	return &serviceAccountTokens{options: o, issuer: issuer, issuerURL: o.Issuers[0],
		maxExpiration: o.MaxExpiration, publicKeys: getter}, nil
}

// applyAuthentication sets up kube-apiserver's authenticators: client
// certificates (the generated CA and --client-ca-file), --token-auth-file,
// service account tokens (with lookup, so a deleted account's tokens stop
// working), and anonymous requests on anonymousPaths only.
func applyAuthentication(gc *genericapiserver.Config, cfg Config, sa *serviceAccountTokens, client kubernetes.Interface, factory informers.SharedInformerFactory) error {
	o := kubeoptions.NewBuiltInAuthenticationOptions().WithClientCert().WithTokenFile()
	o.ServiceAccounts = sa.options
	o.TokenFile.TokenFile = cfg.TokenAuthFile
	ca, err := dynamiccertificates.NewStaticCAContent("client-ca", cfg.ClientCA)
	if err != nil {
		return fmt.Errorf("client CA: %w", err)
	}
	o.ClientCert.CAContentProvider = ca
	if err := errors.Join(o.Validate()...); err != nil {
		return err
	}
	if err := o.ApplyTo(context.Background(), &gc.Authentication, gc.SecureServing, nil, gc.OpenAPIConfig, gc.OpenAPIV3Config,
		client, factory, gc.APIServerID); err != nil {
		return fmt.Errorf("authentication: %w", err)
	}
	conditions := make([]apiserverapi.AnonymousAuthCondition, 0, len(anonymousPaths))
	for _, p := range anonymousPaths {
		conditions = append(conditions, apiserverapi.AnonymousAuthCondition{Path: p})
	}
	gc.Authentication.Authenticator = union.New(gc.Authentication.Authenticator, anonymous.NewAuthenticator(conditions))
	return nil
}

// NewAuthorizationOptions are kubeboot's authorization defaults:
// kube-apiserver's option group with --authorization-mode=Node,RBAC.
func NewAuthorizationOptions() *kubeoptions.BuiltInAuthorizationOptions {
	o := kubeoptions.NewBuiltInAuthorizationOptions()
	o.Modes = []string{"Node", "RBAC"}
	return o
}

// applyAuthorization builds the authorizer and rule resolver o describes
// (nil: NewAuthorizationOptions).
func applyAuthorization(gc *genericapiserver.Config, o *kubeoptions.BuiltInAuthorizationOptions, factory informers.SharedInformerFactory) error {
	if o == nil {
		o = NewAuthorizationOptions()
	}
	if err := errors.Join(o.Validate()...); err != nil {
		return err
	}
	c, err := o.ToAuthorizationConfig(factory)
	if err != nil {
		return fmt.Errorf("authorization: %w", err)
	}
	gc.Authorization.Authorizer, gc.RuleResolver, err = c.New(context.Background(), gc.APIServerID)
	if err != nil {
		return fmt.Errorf("authorization: %w", err)
	}
	return nil
}

// applyAdmission builds the admission chain o describes (nil:
// kube-apiserver's default plugins and order).
func applyAdmission(gc *genericapiserver.Config, o *kubeoptions.AdmissionOptions, client kubernetes.Interface, factory informers.SharedInformerFactory,
	resources serverstorage.APIResourceConfigSource, proxyTransport *http.Transport, resolver webhook.ServiceResolver) error {
	if o == nil {
		o = kubeoptions.NewAdmissionOptions()
	}
	if err := errors.Join(o.Validate()...); err != nil {
		return err
	}
	generic, err := (&controlplaneadmission.Config{
		ExternalInformers:    factory,
		LoopbackClientConfig: gc.LoopbackClientConfig,
		APIResourceConfig:    resources,
	}).New(proxyTransport, nil, resolver, gc.TracerProvider)
	if err != nil {
		return fmt.Errorf("admission: %w", err)
	}
	kube, err := (&kubeadmission.Config{}).New()
	if err != nil {
		return fmt.Errorf("admission: %w", err)
	}
	dynamicClient, err := dynamic.NewForConfig(gc.LoopbackClientConfig)
	if err != nil {
		return fmt.Errorf("admission: %w", err)
	}
	if err := o.ApplyTo(gc, factory, client, dynamicClient, utilfeature.DefaultFeatureGate, gc.EffectiveVersion, append(generic, kube...)...); err != nil {
		return fmt.Errorf("admission: %w", err)
	}
	return nil
}

// clusterAuthenticationInfo is what the cluster-authentication-info
// controller publishes in kube-system/extension-apiserver-authentication.
func clusterAuthenticationInfo(cfg Config) (clusterauthenticationtrust.ClusterAuthenticationInfo, error) {
	clientCA, err := dynamiccertificates.NewStaticCAContent("client-ca", cfg.ClientCA)
	if err != nil {
		return clusterauthenticationtrust.ClusterAuthenticationInfo{}, fmt.Errorf("client CA: %w", err)
	}
	info := clusterauthenticationtrust.ClusterAuthenticationInfo{ClientCA: clientCA}
	if len(cfg.RequestHeaderCA) > 0 {
		rh, err := dynamiccertificates.NewStaticCAContent("request-header", cfg.RequestHeaderCA)
		if err != nil {
			return info, fmt.Errorf("front-proxy CA: %w", err)
		}
		info.RequestHeaderCA = rh
		info.RequestHeaderAllowedNames = headerRequestValue{"front-proxy-client"}
		info.RequestHeaderUsernameHeaders = headerRequestValue{"X-Remote-User"}
		info.RequestHeaderGroupHeaders = headerRequestValue{"X-Remote-Group"}
		info.RequestHeaderExtraHeaderPrefixes = headerRequestValue{"X-Remote-Extra-"}
		info.RequestHeaderUIDHeaders = headerRequestValue{"X-Remote-Uid"}
	}
	return info, nil
}

// headerRequestValue is a fixed list of header names.
type headerRequestValue []string

func (v headerRequestValue) Value() []string { return v }
