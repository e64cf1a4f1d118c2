// Package csrapproval runs an approver of certificate signing requests
// for one signer: each pending request is given a verdict at once and
// again whenever it, or anything its verdict reads, changes. kubeboot's
// approvers (kubeletserving, kubeletclient) differ only in their verdict.
package csrapproval

import (
	"context"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Verdict is an approver's decision on a request: Type is
// certificatesv1.CertificateApproved or CertificateDenied, with the
// condition's reason and message; an empty Type leaves the request
// pending (for another approver, or until what it needs exists).
type Verdict struct {
	Type            certificatesv1.RequestConditionType
	Reason, Message string
}

// Rules are the rights an approver of signer's requests needs: to read
// requests and to approve signer's.
func Rules(signer string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{certificatesv1.GroupName}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{certificatesv1.GroupName}, Resources: []string{"certificatesigningrequests/approval"}, Verbs: []string{"update"}},
		{APIGroups: []string{certificatesv1.GroupName}, Resources: []string{"signers"}, ResourceNames: []string{signer}, Verbs: []string{"approve"}},
	}
}

// Approver decides the pending requests for Signer.
type Approver struct {
	// Name names the approver's queue and its log lines.
	Name string
	// Signer is the signer whose requests it decides.
	Signer string
	// Decide is the verdict on a pending request of Signer.
	Decide func(*certificatesv1.CertificateSigningRequest) Verdict
}

// Run decides the requests until ctx is done. factory must not have been
// started: Run adds the requests' informer to it, starts it, and waits
// for the requests and for inputs, the informers whose objects Decide
// reads; an update of one of them decides every pending request again.
func (a *Approver) Run(ctx context.Context, client kubernetes.Interface, factory informers.SharedInformerFactory, inputs ...cache.SharedIndexInformer) error {
	csrs := factory.Certificates().V1().CertificateSigningRequests()
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: a.Name})
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok && a.pending(csr) {
			queue.Add(csr.Name)
		}
	}
	if _, err := csrs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }}); err != nil {
		return err
	}
	synced := []cache.InformerSynced{csrs.Informer().HasSynced}
	enqueueAll := func(any) {
		all, _ := csrs.Lister().List(labels.Everything())
		for _, csr := range all {
			enqueue(csr)
		}
	}
	for _, in := range inputs {
		if _, err := in.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueueAll, UpdateFunc: func(_, obj any) { enqueueAll(obj) }}); err != nil {
			return err
		}
		synced = append(synced, in.HasSynced)
	}
	factory.StartWithContext(ctx)
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		for a.processNext(ctx, client, queue, csrs.Lister()) {
		}
	}, time.Second)
	<-ctx.Done()
	return nil
}

// processNext decides the next request in queue; false once the queue is
// shut down.
func (a *Approver) processNext(ctx context.Context, client kubernetes.Interface, queue workqueue.TypedRateLimitingInterface[string], csrs certlisters.CertificateSigningRequestLister) bool {
	name, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(name)
	csr, err := csrs.Get(name)
	if apierrors.IsNotFound(err) {
		queue.Forget(name)
		return true
	}
	if err == nil {
		err = a.decide(ctx, client, csr)
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Deciding a certificate signing request", "approver", a.Name, "csr", name)
		queue.AddRateLimited(name)
		return true
	}
	queue.Forget(name)
	return true
}

// decide records csr's verdict, if it has one.
func (a *Approver) decide(ctx context.Context, client kubernetes.Interface, csr *certificatesv1.CertificateSigningRequest) error {
	if !a.pending(csr) {
		return nil
	}
	v := a.Decide(csr)
	if v.Type == "" {
		return nil
	}
	csr = csr.DeepCopy()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: v.Type, Status: corev1.ConditionTrue, Reason: v.Reason, Message: v.Message, LastUpdateTime: metav1.Now(),
	})
	_, err := client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
	if err == nil {
		klog.FromContext(ctx).Info("Decided a certificate signing request", "approver", a.Name, "csr", csr.Name, "decision", v.Type, "reason", v.Message)
	}
	return err
}

// pending reports whether csr is a request for a.Signer not yet decided.
func (a *Approver) pending(csr *certificatesv1.CertificateSigningRequest) bool {
	if csr.Spec.SignerName != a.Signer {
		return false
	}
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed {
			return false
		}
	}
	return true
}
