// Package gatewayapi runs the Gateway API's own conformance suite
// (sigs.k8s.io/gateway-api/conformance v1.6.3, unmodified) against a
// two-node kubeboot cluster of network namespaces, `server --node` and an
// agent (test/conformance's Run), whose GatewayClass kubeboot serves
// Gateways at addresses of their own the nodes hold; the suite's backends
// are built on the machine (test/conformance's BuildImages).
package gatewayapi

import (
	"context"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/apis/v1alpha2"
	"sigs.k8s.io/gateway-api/apis/v1alpha3"
	"sigs.k8s.io/gateway-api/apis/v1beta1"
	xv1alpha1 "sigs.k8s.io/gateway-api/apisx/v1alpha1"
	gatewayconformance "sigs.k8s.io/gateway-api/conformance"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/utils/config"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"

	"github.com/kubeboot/kubeboot/test/conformance"
	"github.com/kubeboot/kubeboot/test/harness"
)

var (
	profiles = flag.String("gatewayapi.profiles", "",
		"the conformance profiles to run, comma-separated (GATEWAY-HTTP, ...); default: CI's slice, the core tests of GATEWAY-HTTP, GATEWAY-GRPC and GATEWAY-TLS")
	reportDir = flag.String("gatewayapi.report", "",
		"directory for the suite's ConformanceReport (default: the test's temporary directory, removed after)")
	channel = flag.String("gatewayapi.channel", "",
		"the Gateway API release channel whose CRDs the server installs (--gateway-api-channel): experimental for its fields' features (HTTPRouteRetry); default: the server's default")
	cacheDir = flag.String("gatewayapi.cache", "",
		"directory keeping the build (Debian's packages, the programs) between runs (default: the test's temporary directory)")
)

func TestMain(m *testing.M) { harness.Main(m) }

// cluster is conformance.ServerAndAgent's shape, its nodes named apart
// from the other suites' (the nodes' cgroup roots are named after them),
// whose packages go test may run at the same time; each Gateway has an
// address of its own on the machines' network, which one of the nodes
// holds.
var cluster = conformance.Shape{ServerNode: "gateway-a", Agents: []conformance.Machine{{IP: "198.51.100.2", Node: "gateway-b"}},
	ServerArgs: []string{"--gateway-addresses=198.51.100.100-198.51.100.150"}}

// TestGatewayAPIConformance runs the suite on kubeboot's GatewayClass:
// CI's slice is the core tests of GATEWAY-HTTP, GATEWAY-GRPC and
// GATEWAY-TLS; -gatewayapi.profiles runs whole profiles (the extended
// features the class says it supports too) and writes the suite's
// ConformanceReport to -gatewayapi.report.
func TestGatewayAPIConformance(t *testing.T) {
	shape := cluster
	if *channel != "" {
		shape.ServerArgs = append(slices.Clone(shape.ServerArgs), "--gateway-api-channel="+*channel)
	}
	conformance.Run(t, shape, build, func(ctx context.Context, t *testing.T, c *conformance.Cluster) {
		opts := options(t, c)
		start := time.Now()
		gatewayconformance.RunConformanceWithOptions(t, opts)
		t.Logf("the suite ran in %s; its report: %s", time.Since(start).Round(time.Second), opts.ReportOutputPath)
	})
}

// options are the suite's: clients of the cluster's admin, kubeboot's
// GatewayClass, the profiles asked for (or CI's), the report's path.
func options(t *testing.T, c *conformance.Cluster) suite.ConformanceOptions {
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, install := range []func(*runtime.Scheme) error{v1alpha3.Install, v1alpha2.Install, v1beta1.Install, gatewayv1.Install, xv1alpha1.Install, apiextensionsv1.AddToScheme} {
		if err := install(cl.Scheme()); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts := suite.ConformanceOptions{
		ConfigurableOptions: suite.ConfigurableOptions{
			GatewayClassName:     "kubeboot",
			CleanupBaseResources: true,
			CleanupTestResources: true,
			TimeoutConfig:        config.DefaultTimeoutConfig(),
			ConformanceProfiles: []suite.ConformanceProfileName{suite.GatewayHTTPConformanceProfileName,
				suite.GatewayGRPCConformanceProfileName, suite.GatewayTLSConformanceProfileName},
			ReportOutputPath: filepath.Join(c.Report, "gateway-api-conformance-report.yaml"),
			// For GatewayStaticAddresses: one of the Gateways' range
			// (ServerArgs), one outside it.
			UsableNetworkAddresses:   []gatewayv1.GatewaySpecAddress{{Value: "198.51.100.150"}},
			UnusableNetworkAddresses: []gatewayv1.GatewaySpecAddress{{Value: "192.0.2.1"}},
			Implementation: confv1.Implementation{Organization: "kubeboot", Project: "kubeboot", URL: "https://github.com/kubeboot/kubeboot",
				Version: "main", Contact: []string{"https://github.com/kubeboot/kubeboot/issues"}},
		},
		Client: cl, Clientset: cs, RestConfig: cfg, ManifestFS: []fs.FS{&gatewayconformance.Manifests},
	}
	if *profiles != "" {
		opts.ConformanceProfiles = nil
		for _, p := range strings.Split(*profiles, ",") {
			opts.ConformanceProfiles = append(opts.ConformanceProfiles, suite.ConformanceProfileName(p))
		}
	} else {
		// CI's slice: the three profiles' core features, and TLSRoute's
		// modes: the suite checks that a class without them refuses
		// Terminate listeners, which kubeboot's serves.
		opts.SupportedFeatures = sets.New(features.SupportGateway, features.SupportHTTPRoute, features.SupportGRPCRoute,
			features.SupportTLSRoute, features.SupportReferenceGrant,
			features.SupportTLSRouteModeTerminate, features.SupportTLSRouteModeMixed).UnsortedList()
	}
	return opts
}

// build builds the images the suite's manifests run.
func build(ctx context.Context, t *testing.T) conformance.Artifacts {
	work := conformance.BuildDir(t, *cacheDir)
	start := time.Now()
	layout, err := conformance.BuildImages(ctx, conformance.ModuleRoot(t), filepath.Join(work, "images"), conformance.GatewayAPIImages, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the suite's images built in %s", time.Since(start).Round(time.Second))
	return conformance.Artifacts{Report: *reportDir, Layout: layout}
}
