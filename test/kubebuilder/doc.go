// Package kubebuilder is a controller test suite as kubebuilder scaffolds
// it (Ginkgo, suite_test.go with BeforeSuite and AfterSuite, the manager's
// client), switched from controller-runtime's envtest to kubeboot's by
// its import line alone: the suite creates a Pod in the default namespace
// at once, which controller-runtime's envtest allows (its apiserver runs
// without the ServiceAccount admission plugin), and a custom resource of
// the CRDs the suite installs.
package kubebuilder
