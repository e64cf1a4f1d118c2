package apiserver

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
)

// immortalNamespaces may never be deleted.
var immortalNamespaces = sets.New(metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic)

// newAdmission returns the admission chain: NamespaceLifecycle, which keeps
// the system namespaces and refuses objects in missing or terminating
// namespaces.
func newAdmission(client kubernetes.Interface, informers informers.SharedInformerFactory) (admission.Interface, error) {
	nl, err := lifecycle.NewLifecycle(immortalNamespaces)
	if err != nil {
		return nil, fmt.Errorf("namespace lifecycle admission: %w", err)
	}
	nl.SetExternalKubeClientSet(client)
	nl.SetExternalKubeInformerFactory(informers)
	if err := nl.ValidateInitialization(); err != nil {
		return nil, fmt.Errorf("namespace lifecycle admission: %w", err)
	}
	return admission.NewChainHandler(nl), nil
}
