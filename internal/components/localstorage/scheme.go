package localstorage

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// The external provisioner library's NewProvisionController registers
// core/v1 into client-go's global scheme each time it runs
// (v1.AddToScheme(scheme.Scheme), v13.0.0 and v13.1.0). A scheme's maps
// are not safe to write while anything reads them, and every informer of
// a server or node decodes with that scheme, so a start could die of a
// concurrent map read and write (docs/RELIABILITY.md). client-go's scheme
// package registers core/v1 at its own init, so the call has nothing to
// add: from this package's init, core/v1's AddToScheme leaves that scheme
// alone, and does what it did for every other scheme.
func init() {
	add := corev1.AddToScheme
	corev1.AddToScheme = func(s *runtime.Scheme) error {
		if s == scheme.Scheme {
			return nil
		}
		return add(s)
	}
}
