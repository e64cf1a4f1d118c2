// Package metricsserver runs metrics-server (sigs.k8s.io/metrics-server
// v0.9) inside kubeboot's process (`kubeboot server`): the resource
// metrics API, metrics.k8s.io, that `kubectl top` and the
// HorizontalPodAutoscaler read, served through the aggregator as in any
// cluster. Its scraper, storage, API and server are metrics-server's own
// code.
//
// What differs from metrics-server's Deployment, and why:
//   - It runs on the server that holds the lease
//     kube-system/metrics-server, on a port of that server's address. Its
//     Service has no selector: the leader writes the EndpointSlice with
//     its own address and port, and the APIService, as its manifests
//     would have them.
//   - It serves with a certificate the cluster CA signs for the Service's
//     name, which the APIService's caBundle verifies, instead of a
//     self-signed one the aggregator would have to take unverified.
//   - It reaches the kubelets with a client certificate the cluster CA
//     signs for User, verifies their serving certificates with the
//     cluster CA, and reaches agents' kubelets through their tunnels, as
//     the server does.
//   - Simulated nodes have no kubelet: their usage is computed from
//     their Pods (simulated.go), so an autoscaler can be tested without
//     containers.
//   - Its informers share the Pods and Nodes they cache with the
//     process's other components (sharedobjects), and its API reads the
//     Running Pods from the same cache rather than from a second, metadata
//     informer.
//   - Its own metrics (a histogram per node among them) are not
//     registered: with thousands of simulated nodes they would outweigh
//     every other series of the process.
package metricsserver

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	discoveryv1ac "k8s.io/client-go/applyconfigurations/discovery/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/klog/v2"
	apiregistrationv1ac "k8s.io/kube-aggregator/pkg/client/applyconfiguration/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	msoptions "sigs.k8s.io/metrics-server/cmd/metrics-server/app/options"
	"sigs.k8s.io/metrics-server/pkg/api"
	"sigs.k8s.io/metrics-server/pkg/scraper"
	"sigs.k8s.io/metrics-server/pkg/scraper/client"
	"sigs.k8s.io/metrics-server/pkg/scraper/client/resource"
	msserver "sigs.k8s.io/metrics-server/pkg/server"
	"sigs.k8s.io/metrics-server/pkg/storage"

	"github.com/kubeboot/kubeboot/internal/components/election"
	"github.com/kubeboot/kubeboot/internal/platform/pki"
	"github.com/kubeboot/kubeboot/internal/platform/presence"
	"github.com/kubeboot/kubeboot/internal/platform/sharedobjects"
)

const (
	// User is the user metrics-server acts as, as its manifests' service
	// account does: towards the server and the kubelets.
	User = "system:metrics-server"
	// Name names the component, its lease, Service and EndpointSlice in
	// kube-system, and its serving certificate's files in the pki
	// directory.
	Name = "metrics-server"
	// APIServiceName is the APIService of metrics.k8s.io/v1beta1.
	APIServiceName = "v1beta1.metrics.k8s.io"
	// managedBy marks the objects it publishes as this component's
	// (managedByLabel, and the EndpointSlice's
	// endpointslice.kubernetes.io/managed-by).
	managedBy      = "metrics-server.kubeboot.io"
	managedByLabel = "app.kubernetes.io/managed-by"
	// fieldManager owns the fields of the objects it publishes.
	fieldManager = "kubeboot-metrics-server"
	// servicePort is the Service's port, as in metrics-server's manifests.
	servicePort = 443
)

// server is one server's metrics-server: what it needs to run.
type server struct {
	opts      *msoptions.Options
	election  componentbaseconfig.LeaderElectionConfiguration
	client    *rest.Config
	advertise netip.Addr
	dial      utilnet.DialFunc // nil: directly
	shared    *sharedobjects.Pool
	pkiDir    string
	caFile    string
	caKey     string
}

// run runs metrics-server while this server holds its lease (or always,
// without leader election) until ctx is done; a failure is logged and
// retried: the cluster runs on without resource metrics meanwhile.
//
// Until there is a node to scrape it holds no lease and serves nothing,
// unless an earlier start published the API, which must not go unserved.
func run(ctx context.Context, s *server) error {
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithName(Name))
	if err := s.waitForNodes(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	election.Lead(ctx, election.Config{Name: Name, Election: s.election, Client: s.client}, s.serve)
	return nil
}

// waitForNodes returns once a Node exists, at once if this component's
// APIService does.
func (s *server) waitForNodes(ctx context.Context) error {
	aggregator, err := aggregatorclient.NewForConfig(s.client)
	if err != nil {
		return err
	}
	if _, err := aggregator.ApiregistrationV1().APIServices().Get(ctx, APIServiceName, metav1.GetOptions{}); err == nil {
		return nil
	}
	client, err := kubernetes.NewForConfig(s.client)
	if err != nil {
		return err
	}
	if err := presence.Wait(ctx, cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "nodes", "", fields.Everything())); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("A Node exists: starting metrics-server")
	return nil
}

// serve builds metrics-server and runs it until ctx is done: it scrapes
// the nodes every --metric-resolution and serves metrics.k8s.io on its
// port, which it publishes.
func (s *server) serve(ctx context.Context) error {
	o := *s.opts
	serving := *o.SecureServing.SecureServingOptions
	ca, err := pki.Load(s.caFile, s.caKey)
	if err != nil {
		return fmt.Errorf("the cluster CA: %w", err)
	}
	if serving.ServerCert.CertKey.CertFile == "" {
		if _, err := pki.EnsureServing(s.pkiDir, Name, ca, pki.ServingSpec{CommonName: Name,
			DNSNames: []string{Name + "." + metav1.NamespaceSystem + ".svc"}, IPs: []net.IP{net.IP(s.advertise.AsSlice())}}); err != nil {
			return fmt.Errorf("serving certificate: %w", err)
		}
		serving.ServerCert.CertKey.CertFile = filepath.Join(s.pkiDir, Name+".crt")
		serving.ServerCert.CertKey.KeyFile = filepath.Join(s.pkiDir, Name+".key")
	}
	bind := serving.BindAddress
	if bind == nil {
		bind = net.IP(s.advertise.AsSlice())
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(bind.String(), strconv.Itoa(serving.BindPort)))
	if err != nil {
		return fmt.Errorf("--secure-port: %w", err)
	}
	// Closed here on the way out whatever happens; the generic server
	// closes it too once it serves (a second close does nothing).
	defer ln.Close()
	serving.Listener, serving.BindPort = ln, ln.Addr().(*net.TCPAddr).Port
	o.SecureServing = serving.WithLoopback()
	m, frontProxyCA, err := s.build(&o, ca)
	if err != nil {
		return err
	}
	// The aggregator is sent here only once the front proxy's CA is
	// loaded: upstream's delegated authentication reads it from
	// kube-system/extension-apiserver-authentication through an informer
	// the server starts as it serves, and until then refuses the
	// aggregator's client certificate with an error line per request.
	// The provider tells its listeners when it loads; they must be added
	// before it runs.
	changed := make(signal, 1)
	if frontProxyCA != nil {
		frontProxyCA.AddListener(changed)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- m.RunUntil(ctx.Done()) }()
	for frontProxyCA != nil && len(frontProxyCA.CurrentCABundleContent()) == 0 {
		select {
		case err := <-ran:
			return err
		case <-changed:
		}
	}
	if err := s.publish(ctx, serving.BindPort, ca.CertPEM); err != nil {
		cancel()
		<-ran
		return fmt.Errorf("publishing the resource metrics API: %w", err)
	}
	klog.FromContext(ctx).Info("Serving resource metrics", "address", ln.Addr().String(), "resolution", o.MetricResolution)
	return <-ran
}

// signal is a dynamiccertificates.Listener that marks a channel of one
// without waiting: what changed is read from the provider.
type signal chan struct{}

func (s signal) Enqueue() {
	select {
	case s <- struct{}{}:
	default:
	}
}

// runner is metrics-server's server (its type is unexported).
type runner interface {
	RunUntil(stopCh <-chan struct{}) error
}

// build is metrics-server's server as its Config.Complete builds it, but
// for the kubelets simulated nodes stand in for, the informers and the
// metrics (see the package documentation). It returns the CA its
// authentication verifies the aggregator's front proxy with (nil if it
// trusts none).
func (s *server) build(o *msoptions.Options, ca *pki.KeyPair) (runner, dynamiccertificates.CAContentProvider, error) {
	genericConfig, err := o.ApiserverConfig()
	if err != nil {
		return nil, nil, err
	}
	var frontProxyCA dynamiccertificates.CAContentProvider
	if h := genericConfig.Authentication.RequestHeaderConfig; h != nil {
		frontProxyCA = h.CAContentProvider
	}
	// Not the process-wide registry's /metrics (the apiserver serves it).
	genericConfig.EnableMetrics = false
	kubelets, err := s.kubeletClient(o, ca)
	if err != nil {
		return nil, nil, err
	}
	c := rest.CopyConfig(s.client)
	c.ContentType = "application/vnd.kubernetes.protobuf"
	typed, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, nil, err
	}
	factory := informers.NewSharedInformerFactory(typed, 0)
	pods := factory.Core().V1().Pods().Informer()
	nodes := factory.Core().V1().Nodes()
	if err := pods.SetTransform(s.shared.Transform); err != nil {
		return nil, nil, err
	}
	if err := pods.AddIndexers(cache.Indexers{nodeNameIndex: podNodeName}); err != nil {
		return nil, nil, err
	}
	if err := nodes.Informer().SetTransform(s.shared.Transform); err != nil {
		return nil, nil, err
	}
	var selector []labels.Requirement
	if o.KubeletClient.NodeSelector != "" {
		if selector, err = labels.ParseToRequirements(o.KubeletClient.NodeSelector); err != nil {
			return nil, nil, fmt.Errorf("--node-selector: %w", err)
		}
	}
	sources := &sources{kubelets: kubelets, simulated: newSimulatedNodes(pods.GetIndexer(), time.Now)}
	scrape := scraper.NewScraper(nodes.Lister(), sources, o.KubeletClient.KubeletRequestTimeout, selector)
	generic, err := genericConfig.Complete(nil).New(Name, genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, nil, err
	}
	store := storage.NewStorage(o.MetricResolution)
	if err := api.Install(store, runningPods{pods.GetIndexer()}, nodes.Lister(), generic, selector); err != nil {
		return nil, nil, err
	}
	m := msserver.NewServer(nodes.Informer(), pods, generic, store, scrape, o.MetricResolution)
	if err := m.RegisterProbes(synced{pods: pods, nodes: nodes.Informer()}); err != nil {
		return nil, nil, err
	}
	return m, frontProxyCA, nil
}

// kubeletClient is metrics-server's client of the kubelets' resource
// metrics, with a client certificate for User and the cluster CA, through
// the server's connections to the cluster.
func (s *server) kubeletClient(o *msoptions.Options, ca *pki.KeyPair) (client.KubeletMetricsGetter, error) {
	cert, err := pki.NewClient(ca, User, nil)
	if err != nil {
		return nil, err
	}
	c := &rest.Config{
		TLSClientConfig: rest.TLSClientConfig{CAData: ca.CertPEM, CertData: cert.CertPEM, KeyData: cert.KeyPEM},
		Dial:            s.dial,
	}
	return resource.NewForConfig(o.KubeletClient.Config(c))
}

// publish applies the Service, its EndpointSlice (this server's address
// and port) and the APIService that make the aggregator send
// metrics.k8s.io here.
func (s *server) publish(ctx context.Context, port int, caPEM []byte) error {
	typed, err := kubernetes.NewForConfig(s.client)
	if err != nil {
		return err
	}
	aggregator, err := aggregatorclient.NewForConfig(s.client)
	if err != nil {
		return err
	}
	apply := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	objectLabels := map[string]string{"k8s-app": Name, managedByLabel: managedBy}
	svc := corev1ac.Service(Name, metav1.NamespaceSystem).WithLabels(objectLabels).
		WithSpec(corev1ac.ServiceSpec().WithPorts(corev1ac.ServicePort().WithName("https").WithPort(servicePort).
			WithProtocol(corev1.ProtocolTCP).WithTargetPort(intstr.FromString("https"))))
	if _, err := typed.CoreV1().Services(metav1.NamespaceSystem).Apply(ctx, svc, apply); err != nil {
		return err
	}
	family := discoveryv1.AddressTypeIPv4
	if s.advertise.Is6() {
		family = discoveryv1.AddressTypeIPv6
	}
	slice := discoveryv1ac.EndpointSlice(Name, metav1.NamespaceSystem).
		WithLabels(map[string]string{discoveryv1.LabelServiceName: Name, discoveryv1.LabelManagedBy: managedBy}).
		WithAddressType(family).
		WithEndpoints(discoveryv1ac.Endpoint().WithAddresses(s.advertise.String()).
			WithConditions(discoveryv1ac.EndpointConditions().WithReady(true))).
		WithPorts(discoveryv1ac.EndpointPort().WithName("https").WithPort(int32(port)).WithProtocol(corev1.ProtocolTCP))
	if _, err := typed.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem).Apply(ctx, slice, apply); err != nil {
		return err
	}
	gv := schema.GroupVersion{Group: "metrics.k8s.io", Version: "v1beta1"}
	apiService := apiregistrationv1ac.APIService(APIServiceName).WithLabels(objectLabels).
		WithSpec(apiregistrationv1ac.APIServiceSpec().WithGroup(gv.Group).WithVersion(gv.Version).
			WithService(apiregistrationv1ac.ServiceReference().WithNamespace(metav1.NamespaceSystem).WithName(Name).WithPort(servicePort)).
			WithCABundle(caPEM...).WithGroupPriorityMinimum(100).WithVersionPriority(100))
	_, err = aggregator.ApiregistrationV1().APIServices().Apply(ctx, apiService, apply)
	return err
}

// synced reports whether the informers have synced, for metrics-server's
// health check (which takes a metadata informer factory's).
type synced struct{ pods, nodes cache.SharedIndexInformer }

// WaitForCacheSync implements metrics-server's cacheSyncWaiter.
func (s synced) WaitForCacheSync(stop <-chan struct{}) map[schema.GroupVersionResource]bool {
	return map[schema.GroupVersionResource]bool{
		corev1.SchemeGroupVersion.WithResource("pods"):  cache.WaitForCacheSync(stop, s.pods.HasSynced),
		corev1.SchemeGroupVersion.WithResource("nodes"): cache.WaitForCacheSync(stop, s.nodes.HasSynced),
	}
}
