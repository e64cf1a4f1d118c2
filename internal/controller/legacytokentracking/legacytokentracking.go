// Package legacytokentracking records since when this cluster tracks the
// use of legacy service account tokens: ConfigMap
// kube-system/kube-apiserver-legacy-service-account-token-tracking with key
// "since" (YYYY-MM-DD), created once and recreated if deleted, as
// kube-apiserver's controller.
package legacytokentracking

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Name and key of the ConfigMap.
const (
	ConfigMapName   = "kube-apiserver-legacy-service-account-token-tracking"
	SinceKey        = "since"
	DateFormat      = "2006-01-02"
	DefaultInterval = time.Minute
)

// Controller keeps the ConfigMap in existence.
type Controller struct {
	client   kubernetes.Interface
	interval time.Duration
	now      func() time.Time
}

// New returns a controller.
func New(client kubernetes.Interface, interval time.Duration) *Controller {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Controller{client: client, interval: interval, now: time.Now}
}

// Start creates the ConfigMap once (retrying until it succeeds or ctx
// ends), then recreates it if it goes missing.
func (c *Controller) Start(ctx context.Context) error {
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		return c.sync(ctx) == nil, nil
	}); err != nil {
		return err
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.sync(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Writing the legacy token tracking ConfigMap")
		}
	}, c.interval)
	return nil
}

func (c *Controller) sync(ctx context.Context) error {
	cms := c.client.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	cur, err := cms.Get(ctx, ConfigMapName, metav1.GetOptions{})
	if err == nil {
		if _, perr := time.Parse(DateFormat, cur.Data[SinceKey]); perr == nil {
			return nil
		}
		// A missing or unreadable date is reset to today, as upstream.
		next := cur.DeepCopy()
		if next.Data == nil {
			next.Data = map[string]string{}
		}
		next.Data[SinceKey] = c.now().UTC().Format(DateFormat)
		_, err = cms.Update(ctx, next, metav1.UpdateOptions{})
		return err
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: metav1.NamespaceSystem},
		Data:       map[string]string{SinceKey: c.now().UTC().Format(DateFormat)},
	}
	_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
