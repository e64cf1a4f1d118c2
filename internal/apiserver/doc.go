// Package apiserver assembles kubeboot's API server on k8s.io/apiserver:
// secure serving, authentication, authorization, admission, etcd storage,
// the served API groups, OpenAPI, and health checks. It knows nothing of
// flags or files: controlplane builds its Config.
package apiserver
