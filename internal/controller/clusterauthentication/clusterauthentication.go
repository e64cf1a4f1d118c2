// Package clusterauthentication publishes how this cluster authenticates
// clients in ConfigMap kube-system/extension-apiserver-authentication, which
// extension apiservers read: the client CA bundle, merged with what other
// apiservers of the cluster published, as kube-apiserver does.
package clusterauthentication

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"maps"
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

// Request header keys: how extension apiservers authenticate requests the
// aggregator proxies to them (the front proxy's client certificate, and the
// headers that carry the user).
const (
	RequestHeaderCAKey           = "requestheader-client-ca-file"
	RequestHeaderAllowedNamesKey = "requestheader-allowed-names"
	RequestHeaderUsernameKey     = "requestheader-username-headers"
	RequestHeaderUIDKey          = "requestheader-uid-headers"
	RequestHeaderGroupKey        = "requestheader-group-headers"
	RequestHeaderExtraPrefixKey  = "requestheader-extra-headers-prefix"
)

// RequestHeader is the aggregator's side of the request header contract.
type RequestHeader struct {
	// CA signs the aggregator's client certificate (PEM).
	CA []byte
	// AllowedNames are the common names that certificate may carry.
	AllowedNames []string
}

// Controller keeps the ConfigMap holding at least our client CAs and the
// aggregator's request header settings.
type Controller struct {
	client        kubernetes.Interface
	clientCA      []byte
	requestHeader *RequestHeader
	interval      time.Duration
}

// New returns a controller publishing clientCA (PEM) and, when set, the
// request header settings.
func New(client kubernetes.Interface, clientCA []byte, requestHeader *RequestHeader, interval time.Duration) *Controller {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Controller{client: client, clientCA: clientCA, requestHeader: requestHeader, interval: interval}
}

// want returns the ConfigMap's data merged with ours.
func (c *Controller) want(have map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range have {
		out[k] = v
	}
	out[ClientCAKey] = string(mergeBundles([]byte(have[ClientCAKey]), c.clientCA))
	if rh := c.requestHeader; rh != nil {
		out[RequestHeaderCAKey] = string(mergeBundles([]byte(have[RequestHeaderCAKey]), rh.CA))
		out[RequestHeaderAllowedNamesKey] = jsonList(rh.AllowedNames)
		out[RequestHeaderUsernameKey] = jsonList([]string{"X-Remote-User"})
		out[RequestHeaderUIDKey] = jsonList([]string{"X-Remote-Uid"})
		out[RequestHeaderGroupKey] = jsonList([]string{"X-Remote-Group"})
		out[RequestHeaderExtraPrefixKey] = jsonList([]string{"X-Remote-Extra-"})
	}
	return out
}

func jsonList(ss []string) string {
	b, _ := json.Marshal(ss)
	return string(b)
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
			Data:       c.want(nil),
		}
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	want := c.want(cur.Data)
	if maps.Equal(want, cur.Data) {
		return nil
	}
	next := cur.DeepCopy()
	next.Data = want
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
