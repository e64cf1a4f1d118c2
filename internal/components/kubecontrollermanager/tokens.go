package kubecontrollermanager

import (
	"context"
	"fmt"
	"os"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/controller-manager/pkg/clientbuilder"
	"k8s.io/klog/v2"
	cmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"
	serviceaccountcontroller "k8s.io/kubernetes/pkg/controller/serviceaccount"
	"k8s.io/kubernetes/pkg/serviceaccount"
)

// newTokensController builds the legacy service account token controller
// (serviceaccount-token-controller: tokens for Secrets of type
// kubernetes.io/service-account-token), as upstream's Run does before the
// other controllers: its descriptor in NewControllerDescriptors has no
// client builder, which only Run can give it. It signs with
// --service-account-private-key-file and acts through root, not a
// service account of its own: it is what gives legacy service accounts
// their tokens. It is nil when the controller is off or there is no key,
// as upstream's.
func newTokensController(ctx context.Context, cctx cmapp.ControllerContext, root clientbuilder.ControllerClientBuilder) (cmapp.Controller, error) {
	if !cctx.IsControllerEnabled(cmapp.NewControllerDescriptors()[names.ServiceAccountTokenController]) {
		return nil, nil
	}
	sa := cctx.ComponentConfig.SAController
	logger := klog.FromContext(ctx).WithName(names.ServiceAccountTokenController)
	if sa.ServiceAccountKeyFile == "" {
		logger.Info("Controller is disabled because there is no private key")
		return nil, nil
	}
	key, err := keyutil.PrivateKeyFromFile(sa.ServiceAccountKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--service-account-private-key-file: %w", err)
	}
	var rootCA []byte
	if sa.RootCAFile != "" {
		if rootCA, err = os.ReadFile(sa.RootCAFile); err == nil {
			_, err = certutil.ParseCertsPEM(rootCA)
		}
		if err != nil {
			return nil, fmt.Errorf("--root-ca-file: %w", err)
		}
	} else {
		c, err := root.Config("tokens-controller")
		if err != nil {
			return nil, err
		}
		rootCA = c.CAData
	}
	client, err := root.Client("tokens-controller")
	if err != nil {
		return nil, err
	}
	generator, err := serviceaccount.JWTTokenGenerator(serviceaccount.LegacyIssuer, key)
	if err != nil {
		return nil, fmt.Errorf("service account token generator: %w", err)
	}
	tc, err := serviceaccountcontroller.NewTokensController(logger,
		cctx.InformerFactory.Core().V1().ServiceAccounts(), cctx.InformerFactory.Core().V1().Secrets(), client,
		serviceaccountcontroller.TokensControllerOptions{TokenGenerator: generator, RootCA: rootCA})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", names.ServiceAccountTokenController, err)
	}
	return tokensController{tc, int(sa.ConcurrentSATokenSyncs)}, nil
}

// tokensController is the tokens controller as a cmapp.Controller.
type tokensController struct {
	tokens  *serviceaccountcontroller.TokensController
	workers int
}

func (tokensController) Name() string { return names.ServiceAccountTokenController }

func (c tokensController) Run(ctx context.Context) { c.tokens.Run(ctx, c.workers) }
