// Package operator is a sample operator, shaped as kubebuilder scaffolds
// one, whose test suite runs on kubeboot's envtest: a Website CRD in two
// versions (v1 converted to and from the v2 hub by a conversion webhook),
// a validating webhook, and a controller that serves each Website with a
// Deployment and a ConfigMap it owns.
package operator

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1 "github.com/kubeboot/kubeboot/test/operator/api/v1"
	v2 "github.com/kubeboot/kubeboot/test/operator/api/v2"
)

// MaxReplicas is the most replicas the validating webhook admits.
const MaxReplicas = 10

// NewScheme returns a scheme with client-go's types, CRDs and both
// Website versions.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1.AddToScheme, v2.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Setup registers the controller and the webhooks (validation of v2, and
// conversion, which the builder adds since v1 converts to the v2 hub).
func Setup(mgr ctrl.Manager) error {
	if err := ctrl.NewControllerManagedBy(mgr).
		For(&v2.Website{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.ConfigMap{}).
		Complete(&Reconciler{Client: mgr.GetClient()}); err != nil {
		return err
	}
	return ctrl.NewWebhookManagedBy(mgr, &v2.Website{}).WithValidator(Validator{}).Complete()
}

// Reconciler keeps each Website's ConfigMap and Deployment.
type Reconciler struct {
	client.Client
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	site := &v2.Website{}
	if err := r.Get(ctx, req.NamespacedName, site); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !site.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: site.Name + "-page", Namespace: site.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, func() error {
		cm.Data = map[string]string{"index.html": fmt.Sprintf("<h1>%s</h1>", site.Name)}
		return controllerutil.SetControllerReference(site, cm, r.Scheme())
	}); err != nil {
		return ctrl.Result{}, err
	}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: site.Name, Namespace: site.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, deploy, func() error {
		labels := map[string]string{"website": site.Name}
		deploy.Spec.Replicas = &site.Spec.Replicas
		deploy.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
		deploy.Spec.Template.Labels = labels
		container := corev1.Container{Name: "web", Image: site.Spec.Container.Image}
		if site.Spec.Container.Port != 0 {
			container.Ports = []corev1.ContainerPort{{ContainerPort: site.Spec.Container.Port}}
		}
		deploy.Spec.Template.Spec.Containers = []corev1.Container{container}
		deploy.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "page", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}},
		}}}
		return controllerutil.SetControllerReference(site, deploy, r.Scheme())
	}); err != nil {
		return ctrl.Result{}, err
	}
	if site.Status.ConfigMap != cm.Name {
		site.Status.ConfigMap = cm.Name
		if err := r.Status().Update(ctx, site); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// Validator refuses Websites with too many replicas or no image.
type Validator struct{}

var _ admission.Validator[*v2.Website] = Validator{}

func (Validator) validate(site *v2.Website) error {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if site.Spec.Replicas > MaxReplicas {
		errs = append(errs, field.Invalid(spec.Child("replicas"), site.Spec.Replicas, fmt.Sprintf("must be at most %d", MaxReplicas)))
	}
	if site.Spec.Container.Image == "" {
		errs = append(errs, field.Required(spec.Child("container", "image"), ""))
	}
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(v2.GroupVersion.WithKind("Website").GroupKind(), site.Name, errs)
}

// ValidateCreate implements admission.Validator.
func (v Validator) ValidateCreate(_ context.Context, site *v2.Website) (admission.Warnings, error) {
	return nil, v.validate(site)
}

// ValidateUpdate implements admission.Validator.
func (v Validator) ValidateUpdate(_ context.Context, _, site *v2.Website) (admission.Warnings, error) {
	return nil, v.validate(site)
}

// ValidateDelete implements admission.Validator.
func (Validator) ValidateDelete(context.Context, *v2.Website) (admission.Warnings, error) {
	return nil, nil
}

// WebhookServing is where a test environment wants the webhook server:
// envtest's LocalServingHost, LocalServingPort and LocalServingCertDir.
type WebhookServing struct {
	Host    string
	Port    int
	CertDir string
}

// StartManager runs the operator's manager against cfg, its webhook server
// where serving says, until ctx ends, and returns a client that reads the
// server directly (not the manager's cache) once the webhook server
// accepts connections, as a suite's set-up does.
func StartManager(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, serving WebhookServing) (client.Client, error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:        scheme,
		WebhookServer: webhook.NewServer(webhook.Options{Host: serving.Host, Port: serving.Port, CertDir: serving.CertDir}),
		Metrics:       metricsserver.Options{BindAddress: "0"},
		// Several managers may share a test binary: the controller names
		// repeat.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	if err := Setup(mgr); err != nil {
		return nil, err
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "The operator's manager stopped")
		}
	}()
	addr := net.JoinHostPort(serving.Host, strconv.Itoa(serving.Port))
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return false, nil
		}
		conn.Close()
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("webhook server at %s: %w", addr, err)
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}
