package controlplane

import "k8s.io/client-go/rest"

// LoopbackConfig is the server's own client configuration, for tests.
func LoopbackConfig(s *Server) *rest.Config { return s.api.Loopback }
