package apiserver

import (
	"fmt"

	apiserverapi "k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
)

// anonymousPaths are the only paths an unauthenticated request may reach,
// as kube-apiserver's default RBAC allows (system:public-info-viewer).
var anonymousPaths = []string{"/healthz", "/livez", "/readyz", "/version"}

// newAuthenticator authenticates client certificates signed by clientCAs,
// bearer tokens from tokenFile (if set), and anonymous requests on the
// health and version paths only; everything else unauthenticated gets 401.
func newAuthenticator(clientCAs x509request.VerifyOptionFunc, tokenFile string) (authenticator.Request, error) {
	authns := []authenticator.Request{x509request.NewDynamic(clientCAs, x509request.CommonNameUserConversion)}
	if tokenFile != "" {
		tokens, err := tokenfile.NewCSV(tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-auth-file: %w", err)
		}
		authns = append(authns, bearertoken.New(tokens))
	}
	// Authenticated users are in system:authenticated, as upstream.
	authn := group.NewAuthenticatedGroupAdder(union.New(authns...))
	conditions := make([]apiserverapi.AnonymousAuthCondition, 0, len(anonymousPaths))
	for _, p := range anonymousPaths {
		conditions = append(conditions, apiserverapi.AnonymousAuthCondition{Path: p})
	}
	return union.New(authn, anonymous.NewAuthenticator(conditions)), nil
}
