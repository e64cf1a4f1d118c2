package gateway

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeboot/kubeboot/internal/components/gateway/dataplane"
)

// IngressClassName is kubeboot's IngressClass, the cluster's default.
const IngressClassName = "kubeboot"

// IngressController is its spec.controller.
const IngressController = "kubeboot.io/ingress-controller"

// legacyClassAnnotation names an Ingress's class where spec.ingressClassName
// does not (Ingresses from before IngressClass).
const legacyClassAnnotation = "kubernetes.io/ingress.class"

// IngressOptions are how the nodes serve Ingresses.
type IngressOptions struct {
	// HTTPPort and HTTPSPort are the nodes' ports of Ingresses
	// (--ingress-http-port, --ingress-https-port). Default: 80, 443.
	HTTPPort, HTTPSPort int32
}

// ours reports whether the Ingress is kubeboot's: of its class, or of none
// (the default class takes those).
func oursIngress(ing *networkingv1.Ingress) bool {
	if c := ing.Spec.IngressClassName; c != nil {
		return *c == IngressClassName
	}
	if c, ok := ing.Annotations[legacyClassAnnotation]; ok {
		return c == IngressClassName
	}
	return true
}

// ingressesOf gives the nodes the Ingresses of kubeboot's class, on the
// HTTP port and, with their TLS hosts' certificates, on the HTTPS port;
// their status is in m.ingresses.
func (m *model) ingressesOf(s *snapshot) {
	o := s.ingress
	var status networkingv1.IngressLoadBalancerStatus
	for _, a := range s.addresses {
		status.Ingress = append(status.Ingress, networkingv1.IngressLoadBalancerIngress{IP: a})
	}
	httpPort, httpHeld := m.ingressPort(s, o.HTTPPort, gatewayv1.HTTPProtocolType)
	httpsPort, httpsHeld := m.ingressPort(s, o.HTTPSPort, gatewayv1.HTTPSProtocolType)
	var held []string
	for port, holder := range map[int32]string{o.HTTPPort: httpHeld, o.HTTPSPort: httpsHeld} {
		if holder != "" {
			held = append(held, fmt.Sprintf("port %d is held by %s", port, holder))
		}
	}
	slices.Sort(held)
	unserved := ""
	if len(held) > 0 {
		unserved = "The nodes serve no Ingress on ports another holds: " + strings.Join(held, "; ")
	}
	if httpsPort != nil && s.defaultCertificate != nil {
		if h := httpsPort.host(""); h.certificate == nil {
			h.certificate = s.defaultCertificate
		}
	}
	for _, ing := range s.ingresses {
		if !oursIngress(ing) {
			continue
		}
		nn := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
		m.ingresses[nn] = status
		if unserved != "" {
			m.ingressUnserved[nn] = unserved
		}
		for _, p := range []*portBuilder{httpPort, httpsPort} {
			if p == nil {
				continue
			}
			addIngress(s, p, ing)
		}
	}
}

// ingressPort is the port Ingresses are served on, nil when it is 0 or
// held by a load balancer Service or with the other protocol, whose
// holder it names.
func (m *model) ingressPort(s *snapshot, port int32, protocol gatewayv1.ProtocolType) (*portBuilder, string) {
	if port == 0 {
		return nil, ""
	}
	if svc, held := s.heldPorts[port]; held {
		return nil, "LoadBalancer Service " + svc
	}
	// The nodes' own addresses serve Ingresses.
	key := portKey{port: port}
	if p, ok := m.ports[key]; ok && p.protocol != protocol {
		return nil, p.owner
	}
	return m.port(key, protocol, "the Ingresses"), ""
}

// addIngress adds ing's rules to a port: each path a route of its host,
// its default backend the last route of each of its hosts and of any
// host, and on a TLS port its TLS hosts' certificate.
func addIngress(s *snapshot, p *portBuilder, ing *networkingv1.Ingress) {
	source := ing.Namespace + "/" + ing.Name
	name := "Ingress " + source
	if p.protocol == gatewayv1.HTTPSProtocolType {
		for _, t := range ing.Spec.TLS {
			cert := ingressCertificate(s, ing.Namespace, t.SecretName)
			if cert == nil {
				continue
			}
			for _, h := range t.Hosts {
				if hb := p.host(h); hb.certificate == nil {
					hb.certificate = cert
				}
			}
		}
	}
	hosts := map[string]bool{}
	for i, rule := range ing.Spec.Rules {
		host := strings.ToLower(rule.Host)
		hosts[host] = true
		if rule.HTTP == nil {
			continue
		}
		hb := p.host(host)
		for j, path := range rule.HTTP.Paths {
			match := gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To(path.Path)}}
			if ptr.Deref(path.PathType, networkingv1.PathTypeImplementationSpecific) == networkingv1.PathTypeExact {
				match.Path.Type = ptr.To(gatewayv1.PathMatchExact)
			}
			if path.Path == "" {
				match.Path.Value = ptr.To("/")
			}
			hb.routes = append(hb.routes, sortedRoute{
				route:   dataplane.Route{Name: name, Match: match, Backends: ingressBackend(s, ing.Namespace, path.Backend)},
				created: ing.CreationTimestamp, source: source, index: i*1000 + j,
			})
		}
	}
	if d := ing.Spec.DefaultBackend; d != nil {
		hosts[""] = true
		for host := range hosts {
			p.host(host).routes = append(p.host(host).routes, sortedRoute{
				route: dataplane.Route{Name: name + " default backend", Match: normalize(gatewayv1.HTTPRouteMatch{}),
					Backends: ingressBackend(s, ing.Namespace, *d)},
				created: ing.CreationTimestamp, source: source, fallback: true,
			})
		}
	}
}

// ingressBackend is the Service port an Ingress backend names: a missing
// one has no endpoints (503), a resource backend is none (500).
func ingressBackend(s *snapshot, ns string, b networkingv1.IngressBackend) []dataplane.Backend {
	if b.Service == nil {
		return []dataplane.Backend{{Namespace: ns, Weight: 1, Invalid: true}}
	}
	out := dataplane.Backend{Namespace: ns, Service: b.Service.Name, Port: b.Service.Port.Number, Weight: 1}
	if svc := s.services[types.NamespacedName{Namespace: ns, Name: b.Service.Name}]; svc != nil {
		for _, p := range svc.Spec.Ports {
			if b.Service.Port.Name != "" && p.Name == b.Service.Port.Name || b.Service.Port.Name == "" && p.Port == b.Service.Port.Number {
				out.Port, out.PortName = p.Port, p.Name
			}
		}
	}
	return []dataplane.Backend{out}
}

// ingressCertificate is the certificate of the Secret an Ingress's TLS
// entry names, nil if it has none.
func ingressCertificate(s *snapshot, ns, name string) *dataplane.Certificate {
	secret := s.secrets[types.NamespacedName{Namespace: ns, Name: name}]
	if secret == nil {
		return nil
	}
	cert := &dataplane.Certificate{Cert: secret.Data[corev1.TLSCertKey], Key: secret.Data[corev1.TLSPrivateKeyKey]}
	if _, err := tls.X509KeyPair(cert.Cert, cert.Key); err != nil {
		return nil
	}
	return cert
}
