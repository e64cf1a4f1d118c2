package controlplane

import "k8s.io/client-go/rest"

// LoopbackConfig is the server's own client configuration, for tests.
func LoopbackConfig(s *Server) *rest.Config { return s.api.Loopback }

// Close stops what New started, for tests that do not Run the server.
func Close(s *Server) { s.close() }
