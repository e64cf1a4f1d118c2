package apiserver

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"

	apiserverapi "k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/keyutil"
	controlplaneadmission "k8s.io/kubernetes/pkg/controlplane/apiserver/admission"
	"k8s.io/kubernetes/pkg/controlplane/controller/clusterauthenticationtrust"
	kubeadmission "k8s.io/kubernetes/pkg/kubeapiserver/admission"
	kubeoptions "k8s.io/kubernetes/pkg/kubeapiserver/options"
	"k8s.io/kubernetes/pkg/serviceaccount"
)

// anonymousPaths are the only paths an unauthenticated request may reach
// unless anonymous authentication is switched on: what kube-apiserver's
// default RBAC lets system:unauthenticated read anyway
// (system:public-info-viewer).
var anonymousPaths = []string{"/healthz", "/livez", "/readyz", "/version"}

// NewAuthenticationOptions are kubeboot's authentication flags:
// kube-apiserver's option group with client certificates, a token file,
// service account tokens (with lookup) and bootstrap tokens
// (--enable-bootstrap-token-auth, off by default as in kube-apiserver).
// The service account issuer and verification keys are left for the
// control plane to resolve (from the cluster domain and the signing key).
func NewAuthenticationOptions() *kubeoptions.BuiltInAuthenticationOptions {
	o := kubeoptions.NewBuiltInAuthenticationOptions().WithClientCert().WithTokenFile().WithServiceAccounts().WithBootstrapToken()
	// As the CIS benchmark (1.12, item 1.2.30) asks: a pod-bound token
	// lives as long as asked (the kubelet renews it), not a year.
	o.ServiceAccounts.ExtendExpiration = false
	return o
}

// serviceAccountTokens issues and verifies service account tokens.
type serviceAccountTokens struct {
	issuer        serviceaccount.TokenGenerator
	issuerURL     string
	maxExpiration time.Duration
	// extendExpiration and maxExtendedExpiration are
	// --service-account-extend-token-expiration and the lifetime it gives
	// the kubelets' pod-bound tokens (their 3607 s requests are issued for
	// a year, with a warnafter claim at 3607 s), as kube-apiserver has them.
	extendExpiration      bool
	maxExtendedExpiration time.Duration
	publicKeys            serviceaccount.PublicKeysGetter
}

// newServiceAccountTokens loads the keys o (issuers and verification
// keys resolved) and signingKeyFile name.
func newServiceAccountTokens(o *kubeoptions.ServiceAccountAuthenticationOptions, signingKeyFile string) (*serviceAccountTokens, error) {
	if signingKeyFile == "" || len(o.Issuers) == 0 {
		return nil, errors.New("a service account signing key file and issuer are required")
	}
	key, err := keyutil.PrivateKeyFromFile(signingKeyFile)
	if err != nil {
		return nil, fmt.Errorf("service account signing key %s: %w", signingKeyFile, err)
	}
	issuer, err := serviceaccount.JWTTokenGenerator(o.Issuers[0], key)
	if err != nil {
		return nil, fmt.Errorf("service account signing key %s: %w", signingKeyFile, err)
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
	return &serviceAccountTokens{issuer: issuer, issuerURL: o.Issuers[0],
		maxExpiration: o.MaxExpiration, extendExpiration: o.ExtendExpiration, maxExtendedExpiration: o.MaxExtendedExpiration,
		publicKeys: getter}, nil
}

// applyAuthentication sets up the authenticators o describes (it is not
// modified), client certificates signed by clientCA (the generated CA and
// --client-ca-file's), and anonymous requests on anonymousPaths only. With
// o's defaults: service account tokens are looked up, so a deleted
// account's tokens stop working.
func applyAuthentication(gc *genericapiserver.Config, group *kubeoptions.BuiltInAuthenticationOptions, clientCA dynamiccertificates.CAContentProvider,
	client kubernetes.Interface, factory informers.SharedInformerFactory) error {
	o := *group
	if o.ClientCert != nil {
		clientCert := *o.ClientCert
		o.ClientCert = &clientCert
		o.ClientCert.CAContentProvider = clientCA
	}
	if err := o.ApplyTo(context.Background(), &gc.Authentication, gc.SecureServing, nil, gc.OpenAPIConfig, gc.OpenAPIV3Config,
		client, factory, gc.APIServerID); err != nil {
		return fmt.Errorf("authentication: %w", err)
	}
	conditions := make([]apiserverapi.AnonymousAuthCondition, 0, len(anonymousPaths))
	for _, p := range anonymousPaths {
		conditions = append(conditions, apiserverapi.AnonymousAuthCondition{Path: p})
	}
	// As kube-apiserver's --anonymous-auth: a request whose credentials
	// fail is refused, not taken for anonymous.
	gc.Authentication.Authenticator = union.NewFailOnError(gc.Authentication.Authenticator,
		requestsWithURL{anonymous.NewAuthenticator(conditions)})
	return nil
}

// requestsWithURL passes only requests that have a URL to an
// authenticator that reads it. TokenReview authenticates a request that
// carries nothing but the token under review, which must never be taken
// for anonymous (and the library's anonymous authenticator with path
// conditions would dereference its missing URL).
type requestsWithURL struct{ authenticator.Request }

func (a requestsWithURL) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	if req.URL == nil {
		return nil, false, nil
	}
	return a.Request.AuthenticateRequest(req)
}

// addInProcessUsers gives each of users a random bearer token that
// authenticates it (in no group besides system:authenticated) and returns
// the tokens by user.
func addInProcessUsers(gc *genericapiserver.Config, users []string) map[string]string {
	if len(users) == 0 {
		return nil
	}
	byToken := make(map[string]*user.DefaultInfo, len(users))
	byUser := make(map[string]string, len(users))
	for _, name := range users {
		token := rand.Text()
		byToken[token] = &user.DefaultInfo{Name: name, UID: uuid.NewString(), Groups: []string{user.AllAuthenticated}}
		byUser[name] = token
	}
	gc.Authentication.Authenticator = union.New(authenticatorfactory.NewFromTokens(byToken, gc.Authentication.APIAudiences),
		gc.Authentication.Authenticator)
	return byUser
}

// ClientConfigFor returns a client configuration that authenticates as
// name, one of Config.InProcessUsers, and reaches the server in-process:
// its requests go to the handler chain directly, and copies that keep
// only its Dial (rest.AnonymousClientConfig) reach it over in-memory
// connections.
func (s *Server) ClientConfigFor(name string) (*rest.Config, error) {
	token, ok := s.inProcessTokens[name]
	if !ok {
		return nil, fmt.Errorf("apiserver: %q is not an in-process user", name)
	}
	c := rest.CopyConfig(s.Loopback)
	u, err := url.Parse(c.Host)
	if err != nil {
		return nil, fmt.Errorf("loopback host %q: %w", c.Host, err)
	}
	c.Host = "http://" + u.Host
	c.BearerToken = token
	c.Dial = s.loopback.DialContext
	return c, nil
}

// NewAuthorizationOptions are kubeboot's authorization defaults:
// kube-apiserver's option group with --authorization-mode=Node,RBAC.
func NewAuthorizationOptions() *kubeoptions.BuiltInAuthorizationOptions {
	o := kubeoptions.NewBuiltInAuthorizationOptions()
	o.Modes = []string{"Node", "RBAC"}
	return o
}

// applyAuthorization builds the authorizer and rule resolver o describes.
func applyAuthorization(gc *genericapiserver.Config, o *kubeoptions.BuiltInAuthorizationOptions, factory informers.SharedInformerFactory) error {
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

// applyAdmission builds the admission chain o describes.
func applyAdmission(gc *genericapiserver.Config, o *kubeoptions.AdmissionOptions, client kubernetes.Interface, factory informers.SharedInformerFactory,
	resources serverstorage.APIResourceConfigSource, proxyTransport *http.Transport, resolver webhook.ServiceResolver) error {
	generic, err := (&controlplaneadmission.Config{
		ExternalInformers:    factory,
		LoopbackClientConfig: gc.LoopbackClientConfig,
		APIResourceConfig:    resources,
	}).New(proxyTransport, gc.EgressSelector, resolver, gc.TracerProvider)
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

// dynamicCAs are the CA bundles in files, each reloaded when its file
// changes, as one provider.
func dynamicCAs(purpose string, files []string) (dynamiccertificates.CAContentProvider, error) {
	providers := make([]dynamiccertificates.CAContentProvider, 0, len(files))
	for _, f := range files {
		p, err := dynamiccertificates.NewDynamicCAContentFromFile(purpose, f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", purpose, err)
		}
		providers = append(providers, p)
	}
	return dynamiccertificates.NewUnionCAContentProvider(providers...), nil
}

// clusterAuthenticationInfo is what the cluster-authentication-info
// controller publishes in kube-system/extension-apiserver-authentication:
// clientCA, and the front-proxy CA of cfg.
func clusterAuthenticationInfo(cfg Resources, clientCA dynamiccertificates.CAContentProvider) (clusterauthenticationtrust.ClusterAuthenticationInfo, error) {
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
