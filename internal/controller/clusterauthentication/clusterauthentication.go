// Package clusterauthentication publishes how this cluster authenticates
// clients in ConfigMap kube-system/extension-apiserver-authentication, which
// extension apiservers read: the client CA bundle, merged with what other
// apiservers of the cluster published, as kube-apiserver does.
package clusterauthentication

import (
	"bytes"
	"context"
	"encoding/pem"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Name and keys of the ConfigMap, as kube-apiserver's.
const (
	ConfigMapName      = "extension-apiserver-authentication"
	ClientCAKey        = "client-ca-file"
	DefaultInterval    = time.Minute
	configMapNamespace = metav1.NamespaceSystem
)

// Controller keeps the ConfigMap holding at least our client CAs.
type Controller struct {
	client   kubernetes.Interface
	clientCA []byte
	interval time.Duration
}

// New returns a controller publishing clientCA (PEM).
func New(client kubernetes.Interface, clientCA []byte, interval time.Duration) *Controller {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Controller{client: client, clientCA: clientCA, interval: interval}
}

// Start writes the ConfigMap once (retrying until it succeeds or ctx
// ends), then keeps it every interval.
func (c *Controller) Start(ctx context.Context) error {
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := c.sync(ctx)
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Writing the cluster authentication ConfigMap, will retry", "err", err)
		}
		return err == nil, nil
	}); err != nil {
		return err
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.sync(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Writing the cluster authentication ConfigMap")
		}
	}, c.interval)
	return nil
}

// sync merges our CAs into the ConfigMap.
func (c *Controller) sync(ctx context.Context) error {
	cms := c.client.CoreV1().ConfigMaps(configMapNamespace)
	cur, err := cms.Get(ctx, ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: configMapNamespace},
			Data:       map[string]string{ClientCAKey: string(mergeBundles(nil, c.clientCA))},
		}
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	merged := mergeBundles([]byte(cur.Data[ClientCAKey]), c.clientCA)
	if string(merged) == cur.Data[ClientCAKey] {
		return nil
	}
	next := cur.DeepCopy()
	if next.Data == nil {
		next.Data = map[string]string{}
	}
	next.Data[ClientCAKey] = string(merged)
	_, err = cms.Update(ctx, next, metav1.UpdateOptions{})
	return err
}

// mergeBundles returns the certificates of have followed by those of add
// it lacks, each once.
func mergeBundles(have, add []byte) []byte {
	var out bytes.Buffer
	seen := map[string]bool{}
	for _, bundle := range [][]byte{have, add} {
		rest := bundle
		for {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			if block.Type != "CERTIFICATE" || seen[string(block.Bytes)] {
				continue
			}
			seen[string(block.Bytes)] = true
			_ = pem.Encode(&out, block)
		}
	}
	return out.Bytes()
}
