// Package identitylease publishes this apiserver's identity as a Lease in
// kube-system (apiserver-<hash>, holder <id>_<uuid>) renewed every 10 s, and
// garbage-collects the identity leases of apiservers that stopped renewing,
// as kube-apiserver's identity lease controller and its collector.
package identitylease

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/apimachinery/lease"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Defaults, as kube-apiserver's.
const (
	IdentityLabel          = "apiserver.kubernetes.io/identity"
	IdentityLabelValue     = "kube-apiserver"
	PeerAddressAnnotation  = "kubernetes.io/peer-advertise-address"
	DefaultDurationSeconds = 3600
	DefaultRenewInterval   = 10 * time.Second
	DefaultGCPeriod        = time.Hour
	HostnameLabel          = "kubernetes.io/hostname"
	leaseNamespace         = metav1.NamespaceSystem
	identityLabelSelector  = IdentityLabel + "=" + IdentityLabelValue
)

// Config describes the identity lease.
type Config struct {
	// ID is the apiserver's identity, "apiserver-<hash>": the lease name.
	ID string
	// PeerAddress is "<advertise-address>:<port>".
	PeerAddress string
	// DurationSeconds is the lease duration. Default: 3600.
	DurationSeconds int32
	// RenewInterval is how often it is renewed. Default: 10s.
	RenewInterval time.Duration
	// GCPeriod is how often expired identity leases are collected.
	// Default: 1h.
	GCPeriod time.Duration
}

// Start runs the lease controller and the garbage collector until ctx ends.
func Start(ctx context.Context, client kubernetes.Interface, cfg Config) {
	if cfg.DurationSeconds == 0 {
		cfg.DurationSeconds = DefaultDurationSeconds
	}
	if cfg.RenewInterval == 0 {
		cfg.RenewInterval = DefaultRenewInterval
	}
	if cfg.GCPeriod == 0 {
		cfg.GCPeriod = DefaultGCPeriod
	}
	hostname, _ := os.Hostname()
	holder := cfg.ID + "_" + uuid.NewString()
	ctrl := lease.NewController(clock.RealClock{}, client, holder, cfg.DurationSeconds, nil, cfg.RenewInterval,
		cfg.ID, leaseNamespace, func(l *coordinationv1.Lease) error {
			if l.Labels == nil {
				l.Labels = map[string]string{}
			}
			l.Labels[IdentityLabel] = IdentityLabelValue
			l.Labels[HostnameLabel] = hostname
			if cfg.PeerAddress != "" {
				if l.Annotations == nil {
					l.Annotations = map[string]string{}
				}
				l.Annotations[PeerAddressAnnotation] = cfg.PeerAddress
			}
			return nil
		})
	go ctrl.Run(ctx)
	gc := &collector{client: client}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := gc.sync(ctx, time.Now()); err != nil {
			klog.FromContext(ctx).Error(err, "Collecting expired apiserver identity leases")
		}
	}, cfg.GCPeriod)
}

// collector deletes identity leases that expired.
type collector struct {
	client kubernetes.Interface
}

// sync deletes every identity lease expired at now, re-reading each from
// the server first so that a lease renewed meanwhile survives.
func (c *collector) sync(ctx context.Context, now time.Time) error {
	leases := c.client.CoordinationV1().Leases(leaseNamespace)
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: identityLabelSelector})
	if err != nil {
		return err
	}
	for i := range list.Items {
		if !expired(&list.Items[i], now) {
			continue
		}
		cur, err := leases.Get(ctx, list.Items[i].Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		if !expired(cur, now) {
			continue
		}
		err = leases.Delete(ctx, cur.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &cur.ResourceVersion}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting identity lease %s: %w", cur.Name, err)
		}
		if err == nil {
			klog.FromContext(ctx).Info("Deleted expired apiserver identity lease", "lease", cur.Name)
		}
	}
	return nil
}

func expired(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second).Before(now)
}
