package loopback

import "k8s.io/client-go/rest"

// WithClientSettings returns a copy of inProcess, a client configuration
// that reaches the server in-process, with the connection settings of
// built, the one a component built from its own flags (its
// --kube-api-content-type, --kube-api-qps and --kube-api-burst), which
// the component's clients keep.
func WithClientSettings(inProcess, built *rest.Config) *rest.Config {
	c := rest.CopyConfig(inProcess)
	c.DisableCompression = built.DisableCompression
	c.AcceptContentTypes, c.ContentType = built.AcceptContentTypes, built.ContentType
	c.QPS, c.Burst = built.QPS, built.Burst
	return c
}
