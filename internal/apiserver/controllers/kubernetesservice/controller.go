// Package kubernetesservice is kube-apiserver's bootstrap controller: it
// creates the default/kubernetes Service (correcting its ports and type
// once at start) and keeps its endpoints listing this apiserver through an
// EndpointReconciler, from the moment the server is ready until it stops.
package kubernetesservice

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/internal/apiserver/reconcilers"
)

// Config describes the kubernetes Service and this apiserver's endpoint.
type Config struct {
	// AdvertiseAddress is this apiserver's --advertise-address: the
	// address it publishes in the endpoints.
	AdvertiseAddress netip.Addr
	// ServiceIP is the Service's ClusterIP (the first address of the
	// primary Service range).
	ServiceIP netip.Addr
	// ServicePort is the Service's port: 443.
	ServicePort int32
	// SecurePort is the target port, this apiserver's --secure-port.
	SecurePort int32
	// NodePort is --kubernetes-service-node-port; > 0 makes the Service a
	// NodePort Service.
	NodePort int32
	// Interval is how often the Service and endpoints are reconciled.
	Interval time.Duration
	// Ready is closed once this apiserver's /readyz is 200.
	Ready <-chan struct{}
}

// passTimeout bounds one pass of the loop (at least two intervals).
const passTimeout = 10 * time.Second

// Controller runs the bootstrap loop.
type Controller struct {
	cfg        Config
	client     kubernetes.Interface
	reconciler reconcilers.EndpointReconciler
	recorder   record.EventRecorder
	cancel     context.CancelFunc
	done       chan struct{}
}

// New returns a controller; Start runs it.
func New(cfg Config, client kubernetes.Interface, reconciler reconcilers.EndpointReconciler, recorder record.EventRecorder) *Controller {
	if cfg.ServicePort == 0 {
		cfg.ServicePort = 443
	}
	if cfg.Interval <= 0 {
		cfg.Interval = reconcilers.DefaultReconcileInterval
	}
	return &Controller{cfg: cfg, client: client, reconciler: reconciler, recorder: recorder}
}

// Start removes this apiserver's endpoint left over from an unclean exit,
// then reconciles in the background: once /readyz is 200 it publishes this
// apiserver and keeps the Service and endpoints true every interval (and
// whenever the reconciler reports a change) until Stop.
func (c *Controller) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if removed, err := c.reconciler.RemoveEndpoints(ctx, c.cfg.AdvertiseAddress, c.endpointPorts()); err != nil {
		logger.Error(err, "Removing this apiserver's endpoint left from an earlier run")
	} else if removed {
		logger.Info("Found stale data, removed previous endpoints on kubernetes service, apiserver didn't exit successfully previously")
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	c.done = make(chan struct{})
	go c.run(klog.NewContext(runCtx, logger))
	return nil
}

func (c *Controller) run(ctx context.Context) {
	defer close(c.done)
	logger := klog.FromContext(ctx)
	// Publish only a server that answers.
	select {
	case <-c.cfg.Ready:
	case <-ctx.Done():
		return
	}
	first := true
	ticker := time.NewTicker(c.cfg.Interval)
	defer ticker.Stop()
	for {
		if err := c.sync(ctx, first); err != nil && ctx.Err() == nil {
			// A pass cut short by the stop is not an error.
			logger.Error(err, "Reconciling the kubernetes Service")
		} else if err == nil {
			first = false
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-c.reconciler.Changed():
		}
	}
}

// sync is one pass: the Service exists (and, at start, has the configured
// ports and type), and the endpoints list this apiserver.
func (c *Controller) sync(ctx context.Context, correct bool) error {
	// Bounded: a request that hangs must not stop the loop for good.
	ctx, cancel := context.WithTimeout(ctx, max(passTimeout, 2*c.cfg.Interval))
	defer cancel()
	if err := c.ensureService(ctx, correct); err != nil {
		return err
	}
	return c.reconciler.ReconcileEndpoints(ctx, c.cfg.AdvertiseAddress, c.endpointPorts(), correct)
}

// Stop stops reconciling and removes this apiserver's endpoint (even the
// last one), taking at most two intervals.
func (c *Controller) Stop(ctx context.Context) error {
	start := time.Now()
	logger := klog.FromContext(ctx)
	c.reconciler.StopReconciling()
	if c.cancel != nil {
		c.cancel()
		<-c.done
	}
	logger.V(2).Info("Bootstrap controller loop stopped", "after", time.Since(start))
	ctx, cancel := context.WithTimeout(ctx, 2*c.cfg.Interval)
	defer cancel()
	_, err := c.reconciler.RemoveEndpoints(ctx, c.cfg.AdvertiseAddress, c.endpointPorts())
	c.reconciler.Destroy()
	logger.V(2).Info("Removed this apiserver from the kubernetes endpoints", "after", time.Since(start), "err", err)
	if err != nil {
		return fmt.Errorf("removing this apiserver from the kubernetes endpoints: %w", err)
	}
	return nil
}

func (c *Controller) endpointPorts() []corev1.EndpointPort {
	return []corev1.EndpointPort{{Name: "https", Port: c.cfg.SecurePort, Protocol: corev1.ProtocolTCP}}
}

// desired is the Service as the flags describe it.
func (c *Controller) desired() *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:      reconcilers.ServiceName,
			Namespace: metav1.NamespaceDefault,
			Labels:    map[string]string{"provider": "kubernetes", "component": "apiserver"},
		},
		Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{{
				Name: "https", Protocol: corev1.ProtocolTCP, Port: c.cfg.ServicePort,
				TargetPort: intstr.FromInt32(c.cfg.SecurePort), NodePort: c.cfg.NodePort,
			}},
			// No selector: the endpoints are written by the reconciler.
			ClusterIP:       c.cfg.ServiceIP.String(),
			SessionAffinity: corev1.ServiceAffinityNone,
			Type:            corev1.ServiceTypeClusterIP,
		},
	}
	single := corev1.IPFamilyPolicySingleStack
	svc.Spec.IPFamilyPolicy = &single
	if c.cfg.NodePort > 0 {
		svc.Spec.Type = corev1.ServiceTypeNodePort
	}
	return svc
}

// ensureService creates the Service when missing; when correct, it also
// fixes ports and type that differ from the flags (as at start; later
// manual edits are left alone, as kube-apiserver does).
func (c *Controller) ensureService(ctx context.Context, correct bool) error {
	services := c.client.CoreV1().Services(metav1.NamespaceDefault)
	want := c.desired()
	cur, err := services.Get(ctx, reconcilers.ServiceName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = services.Create(ctx, want, metav1.CreateOptions{})
		if err == nil {
			klog.FromContext(ctx).Info("Created the kubernetes Service", "clusterIP", want.Spec.ClusterIP)
		}
		return err
	}
	if err != nil || !correct {
		return err
	}
	if cur.Spec.Type == want.Spec.Type && portsMatch(cur.Spec.Ports, want.Spec.Ports) {
		return nil
	}
	next := cur.DeepCopy()
	next.Spec.Type = want.Spec.Type
	next.Spec.Ports = want.Spec.Ports
	if _, err := services.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		return err
	}
	msg := fmt.Sprintf("Corrected ports and type to the apiserver's flags (type %s, port %d -> %d)", want.Spec.Type, c.cfg.ServicePort, c.cfg.SecurePort)
	klog.FromContext(ctx).Info("Corrected the kubernetes Service", "type", want.Spec.Type, "targetPort", c.cfg.SecurePort)
	c.recorder.Event(next, corev1.EventTypeNormal, "ServiceSpecCorrected", msg)
	return nil
}

// portsMatch compares what the controller owns of the ports; a zero
// NodePort in want matches any allocated one.
func portsMatch(have, want []corev1.ServicePort) bool {
	if len(have) != len(want) {
		return false
	}
	for i := range want {
		h, w := have[i], want[i]
		if w.NodePort == 0 {
			h.NodePort = 0
		}
		if !apiequality.Semantic.DeepEqual(h, w) {
			return false
		}
	}
	return true
}
