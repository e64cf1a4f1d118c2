package apiserver

import (
	"strings"
	"sync"

	"github.com/google/uuid"
	genericapiserver "k8s.io/apiserver/pkg/server"
	builder2 "k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/common/restfuladapter"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/utils/ptr"
)

// installOpenAPI serves /openapi/v2 and /openapi/v3 as the generic server
// does, except that each document is built on its first request instead of
// at start: most servers (and every test server) start far more often than
// anyone asks for their OpenAPI, and building it costs tens of
// milliseconds and several MB of heap. Server-side apply does not need
// these documents; it builds its own type information at install.
func installOpenAPI(s *genericapiserver.GenericAPIServer, v2 *common.Config, v3 *common.OpenAPIV3Config) error {
	services := s.Handler.GoRestfulContainer.RegisteredWebServices()
	etag := uuid.NewString() // the served APIs never change in a process
	// builder3 deletes extensions from the definitions it is given while
	// built documents (which point into them) are being marshalled: each
	// build gets definitions of its own, and builds run one at a time to
	// bound memory when the aggregator asks for every document at once.
	v3 = ptr.To(*v3)
	v3.Definitions = nil
	var building sync.Mutex

	v2Spec := cached.Once(cached.Func(func() (*spec.Swagger, string, error) {
		building.Lock()
		defer building.Unlock()
		sw, err := builder2.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices(services), v2)
		if err != nil {
			return nil, "", err
		}
		sw.Definitions = handler.PruneDefaults(sw.Definitions)
		return sw, etag, nil
	}))
	handler.NewOpenAPIServiceLazy(v2Spec).RegisterOpenAPIVersionedService("/openapi/v2", s.Handler.NonGoRestfulMux)

	v3Service := handler3.NewOpenAPIService()
	if err := v3Service.RegisterOpenAPIV3VersionedService("/openapi/v3", s.Handler.NonGoRestfulMux); err != nil {
		return err
	}
	for _, ws := range services {
		gv := strings.TrimPrefix(ws.RootPath(), "/")
		one := services[:0:0]
		one = append(one, ws)
		v3Service.UpdateGroupVersionLazy(gv, cached.Once(cached.Func(func() (*spec3.OpenAPI, string, error) {
			building.Lock()
			defer building.Unlock()
			doc, err := builder3.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices(one), v3)
			if err != nil {
				return nil, "", err
			}
			return doc, etag, nil
		})))
	}
	return nil
}
