package apiserver

import (
	"strings"

	restful "github.com/emicklei/go-restful/v3"

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
)

// installOpenAPI serves /openapi/v2 and /openapi/v3 as the generic server
// does, except that the documents are built on their first request
// instead of at start. The v2 document is then built only when a client
// asks for it (kubectl's explain, validation): most servers start far more
// often than anyone reads it, and it costs tens of milliseconds and
// several MB of heap. The aggregator in front reads the v3 discovery,
// which holds a hash of every document, while it starts, so the v3
// documents are built then: all in one pass, on one set of definitions.
// Server-side apply does not need these documents; it builds its own type
// information at install.
func installOpenAPI(s *genericapiserver.GenericAPIServer, v2 *common.Config, v3 *common.OpenAPIV3Config) error {
	services := s.Handler.GoRestfulContainer.RegisteredWebServices()
	etag := uuid.NewString() // the served APIs never change in a process

	v2Spec := cached.Once(cached.Func(func() (*spec.Swagger, string, error) {
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
	all := cached.Once(cached.Func(func() (map[string]*spec3.OpenAPI, string, error) {
		docs, err := buildV3(services, v3)
		return docs, etag, err
	}))
	for _, ws := range services {
		gv := strings.TrimPrefix(ws.RootPath(), "/")
		v3Service.UpdateGroupVersionLazy(gv, cached.Once(cached.Func(func() (*spec3.OpenAPI, string, error) {
			docs, _, err := all.Get()
			if err != nil {
				return nil, "", err
			}
			return docs[gv], etag, nil
		})))
	}
	return nil
}

// buildV3 builds the v3 document of every group version, one after
// another. builder3 deletes extensions from the config's definitions,
// which the documents point into, so no document may be handed out (and
// marshalled) while another is being built.
func buildV3(services []*restful.WebService, config *common.OpenAPIV3Config) (map[string]*spec3.OpenAPI, error) {
	docs := make(map[string]*spec3.OpenAPI, len(services))
	for _, ws := range services {
		doc, err := builder3.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices([]*restful.WebService{ws}), config)
		if err != nil {
			return nil, err
		}
		docs[strings.TrimPrefix(ws.RootPath(), "/")] = doc
	}
	return docs, nil
}
