package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubeboot/kubeboot/internal/api/defaults"
)

// kubernetesService is the default/kubernetes Service as kube-apiserver
// creates it, after defaulting and allocation.
func kubernetesService() *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            "kubernetes",
			Namespace:       "default",
			ResourceVersion: "1",
			Labels:          map[string]string{"provider": "kubernetes", "component": "apiserver"},
		},
		Spec: corev1.ServiceSpec{
			Type:            corev1.ServiceTypeClusterIP,
			ClusterIP:       "10.0.0.1",
			ClusterIPs:      []string{"10.0.0.1"},
			IPFamilies:      []corev1.IPFamily{corev1.IPv4Protocol},
			IPFamilyPolicy:  ptr(corev1.IPFamilyPolicySingleStack),
			SessionAffinity: corev1.ServiceAffinityNone,
			Ports: []corev1.ServicePort{{
				Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(6443),
			}},
		},
	}
	defaults.Service(svc)
	return svc
}

// userService is a Service as a client posts it (not yet allocated),
// changed by mutate and then defaulted as decoding would.
func userService(mutate func(*corev1.Service)) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", ResourceVersion: "1"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Port: 80}},
		},
	}
	if mutate != nil {
		mutate(svc)
	}
	defaults.Service(svc)
	return svc
}

func TestValidateService(t *testing.T) {
	tests := []struct {
		name string
		svc  *corev1.Service
		want []string
	}{
		{name: "kubernetes service", svc: kubernetesService()},
		{name: "minimal user service before allocation", svc: userService(nil)},
		{name: "name starting with a digit (relaxed service names)", svc: userService(func(s *corev1.Service) { s.Name = "1web" })},
		{name: "headless without ports", svc: userService(func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.Ports = "None", []string{"None"}, nil
		})},
		{name: "headless before clusterIPs is filled", svc: userService(func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.Ports = "None", nil
		})},
		{name: "dual-stack", svc: userService(func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.5", []string{"10.96.0.5", "fd00::5"}
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
			s.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicyRequireDualStack)
		})},
		{name: "external name", svc: userService(func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName, s.Spec.Selector = corev1.ServiceTypeExternalName, "db.example.com.", nil
		})},
		{name: "node port", svc: userService(func(s *corev1.Service) {
			s.Spec.Type, s.Spec.Ports[0].NodePort = corev1.ServiceTypeNodePort, 30080
		})},
		{name: "load balancer, local traffic, health check port not allocated yet", svc: userService(func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalTrafficPolicy = corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal
			s.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/24"}
			s.Spec.LoadBalancerClass = ptr("example.com/lb")
		})},
		{name: "client IP affinity", svc: userService(func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP })},
		{name: "named target port and app protocol", svc: userService(func(s *corev1.Service) {
			s.Spec.Ports[0].TargetPort, s.Spec.Ports[0].AppProtocol = intstr.FromString("http"), ptr("kubernetes.io/h2c")
		})},
		{name: "external IPs without traffic policy", svc: userService(func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.10"} })},

		// The Status bodies captured from kube-apiserver 1.36.
		{name: "invalid name", svc: userService(func(s *corev1.Service) { s.Name = "Bad_Name" }),
			want: []string{`metadata.name: Invalid value: "Bad_Name": ` + dns1123LabelMsg}},
		{name: "port out of range", svc: userService(func(s *corev1.Service) { s.Spec.Ports[0].Port = 70000 }),
			want: []string{
				`spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive`,
				`spec.ports[0].targetPort: Invalid value: 70000: must be between 1 and 65535, inclusive`,
			}},
		{name: "no ports", svc: userService(func(s *corev1.Service) { s.Spec.Ports = nil }),
			want: []string{`spec.ports: Required value`}},
		{name: "duplicate port name", svc: userService(func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Name: "a", Port: 80}, {Name: "a", Port: 81}}
		}), want: []string{`spec.ports[1].name: Duplicate value: "a"`}},
		{name: "unnamed ports when several", svc: userService(func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Port: 80}, {Port: 81}}
		}), want: []string{`spec.ports[0].name: Required value`, `spec.ports[1].name: Required value`}},
		{name: "bad protocol", svc: userService(func(s *corev1.Service) { s.Spec.Ports[0].Protocol = "ICMP" }),
			want: []string{`spec.ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"`}},
		{name: "bad type", svc: userService(func(s *corev1.Service) { s.Spec.Type = "Bogus" }),
			want: []string{`spec.type: Unsupported value: "Bogus": supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort"`}},

		{name: "invalid port name", svc: userService(func(s *corev1.Service) { s.Spec.Ports[0].Name = "Web" }),
			want: []string{`spec.ports[0].name: Invalid value: "Web": ` + dns1123LabelMsg}},
		{name: "invalid named target port", svc: userService(func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("http_alt") }),
			want: []string{`spec.ports[0].targetPort: Invalid value: "http_alt": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)`}},
		{name: "same protocol and port twice", svc: userService(func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Name: "a", Port: 80}, {Name: "b", Port: 80}}
		}), want: []string{`spec.ports[1]: Duplicate value: {"Name":"","Protocol":"TCP","AppProtocol":null,"Port":80,"TargetPort":0,"NodePort":0}`}},
		{name: "same port on TCP and UDP", svc: userService(func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Name: "dns", Port: 53}, {Name: "dns-udp", Port: 53, Protocol: corev1.ProtocolUDP}}
		})},
		{name: "node port on ClusterIP service", svc: userService(func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 30080 }),
			want: []string{"spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"}},
		{name: "node port not a port number", svc: userService(func(s *corev1.Service) {
			s.Spec.Type, s.Spec.Ports[0].NodePort = corev1.ServiceTypeNodePort, 70000
		}), want: []string{`spec.ports[0].nodePort: Invalid value: 70000: must be between 1 and 65535, inclusive`}},
		{name: "duplicate node port", svc: userService(func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.Ports = []corev1.ServicePort{{Name: "a", Port: 80, NodePort: 30080}, {Name: "b", Port: 81, NodePort: 30080}}
		}), want: []string{`spec.ports[1].nodePort: Duplicate value: 30080`}},
		{name: "invalid selector", svc: userService(func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "a b"} }),
			want: []string{`spec.selector: Invalid value: "a b": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`}},
		{name: "bad session affinity", svc: userService(func(s *corev1.Service) { s.Spec.SessionAffinity = "Cookie" }),
			want: []string{`spec.sessionAffinity: Unsupported value: "Cookie": supported values: "ClientIP", "None"`}},
		{name: "affinity timeout too long", svc: userService(func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(86401))}}
		}), want: []string{`spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 86401: must be greater than 0 and less than 86400`}},
		{name: "clusterIP and clusterIPs disagree", svc: userService(func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.5", []string{"10.96.0.6"}
		}), want: []string{"spec.clusterIPs: Invalid value: [\"10.96.0.6\"]: first value must match `clusterIP`"}},
		{name: "malformed clusterIP before clusterIPs is filled", svc: userService(func(s *corev1.Service) { s.Spec.ClusterIP = "10.96.0.300" }),
			want: []string{`spec.clusterIP: Invalid value: "10.96.0.300": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`}},
		{name: "clusterIP with leading zeros", svc: userService(func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.05", []string{"10.96.0.05"}
		}), want: []string{`spec.clusterIPs[0]: Invalid value: "10.96.0.05": must not have leading 0s`}},
		{name: "two IPv4 cluster IPs", svc: userService(func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.5", []string{"10.96.0.5", "10.96.0.6"}
		}), want: []string{`spec.clusterIPs: Invalid value: ["10.96.0.5","10.96.0.6"]: may specify no more than one IP for each IP family`}},
		{name: "cluster IP of the wrong family", svc: userService(func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.5", []string{"10.96.0.5"}
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
		}), want: []string{"spec.clusterIPs[0]: Invalid value: \"10.96.0.5\": expected an IPv6 value as indicated by `ipFamilies[0]`"}},
		{name: "bad IP family and policy", svc: userService(func(s *corev1.Service) {
			s.Spec.IPFamilies = []corev1.IPFamily{"IPv5", "IPv5"}
			s.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicy("AnyStack"))
		}), want: []string{
			`spec.ipFamilies[0]: Unsupported value: "IPv5": supported values: "IPv4", "IPv6"`,
			`spec.ipFamilies[1]: Unsupported value: "IPv5": supported values: "IPv4", "IPv6"`,
			`spec.ipFamilies[1]: Duplicate value: "IPv5"`,
			`spec.ipFamilyPolicy: Unsupported value: "AnyStack": supported values: "PreferDualStack", "RequireDualStack", "SingleStack"`,
		}},
		{name: "headless load balancer", svc: userService(func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ClusterIP, s.Spec.ClusterIPs = corev1.ServiceTypeLoadBalancer, "None", []string{"None"}
		}), want: []string{`spec.clusterIPs[0]: Invalid value: "None": may not be set to 'None' for LoadBalancer services`}},
		{name: "external name without a name", svc: userService(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName }),
			want: []string{`spec.externalName: Required value`}},
		{name: "external name with cluster IPs", svc: userService(func(s *corev1.Service) {
			s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "db.example.com"
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.5", []string{"10.96.0.5"}
		}), want: []string{`spec.clusterIPs: Forbidden: may not be set for ExternalName services`}},
		{name: "external IP in loopback range", svc: userService(func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"127.0.0.1"} }),
			want: []string{`spec.externalIPs[0]: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)`}},
		{name: "external traffic policy on internal service", svc: userService(func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}), want: []string{`spec.externalTrafficPolicy: Invalid value: "Local": may only be set for externally-accessible services`}},
		{name: "health check port without local traffic", svc: userService(func(s *corev1.Service) {
			s.Spec.Type, s.Spec.HealthCheckNodePort = corev1.ServiceTypeLoadBalancer, 30100
		}), want: []string{"spec.healthCheckNodePort: Invalid value: 30100: may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"}},
		{name: "source ranges on ClusterIP service", svc: userService(func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/33"} }),
			want: []string{
				"spec.LoadBalancerSourceRanges: Forbidden: may only be used when `type` is 'LoadBalancer'",
				`spec.LoadBalancerSourceRanges[0]: Invalid value: "192.0.2.0/33": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)`,
			}},
		{name: "load balancer class on ClusterIP service", svc: userService(func(s *corev1.Service) { s.Spec.LoadBalancerClass = ptr("example.com/lb") }),
			want: []string{"spec.loadBalancerClass: Forbidden: may only be used when `type` is 'LoadBalancer'"}},
		{name: "unknown traffic distribution", svc: userService(func(s *corev1.Service) { s.Spec.TrafficDistribution = ptr("Anywhere") }),
			want: []string{`spec.trafficDistribution: Unsupported value: "Anywhere": supported values: "PreferClose", "PreferSameZone", "PreferSameNode"`}},
		{name: "bad internal traffic policy", svc: userService(func(s *corev1.Service) {
			s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicy("Node"))
		}), want: []string{`spec.internalTrafficPolicy: Unsupported value: "Node": supported values: "Cluster", "Local"`}},
		{name: "missing namespace", svc: userService(func(s *corev1.Service) { s.Namespace = "" }),
			want: []string{`metadata.namespace: Required value`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, ValidateService(tc.svc), tc.want)
		})
	}
}

func TestValidateServiceUpdate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Service)
		want   []string
	}{
		{name: "unchanged", mutate: func(*corev1.Service) {}},
		{name: "labels change", mutate: func(s *corev1.Service) { s.Labels["tier"] = "control-plane" }},
		// The Status body captured from kube-apiserver 1.36: the bad value is
		// the whole clusterIPs list.
		{name: "update clusterIP (immutable)", mutate: func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.99", []string{"10.96.0.99"}
		}, want: []string{`spec.clusterIPs[0]: Invalid value: ["10.96.0.99"]: may not change once set`}},
		{name: "upgrade to dual-stack", mutate: func(s *corev1.Service) {
			s.Spec.ClusterIPs = []string{"10.0.0.1", "fd00::1"}
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
			s.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicyPreferDualStack)
		}},
		{name: "primary IP family changes", mutate: func(s *corev1.Service) {
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
		}, want: []string{
			`spec.ipFamilies[0]: Invalid value: ["IPv6"]: may not change once set`,
			"spec.clusterIPs[0]: Invalid value: \"10.0.0.1\": expected an IPv6 value as indicated by `ipFamilies[0]`",
		}},
		{name: "clusterIP unset", mutate: func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil },
			want: []string{`spec.clusterIPs[0]: Invalid value: null: primary clusterIP can not be unset`}},
		{name: "to ExternalName drops the cluster IP", mutate: func(s *corev1.Service) {
			s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com", SessionAffinity: corev1.ServiceAffinityNone}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := kubernetesService()
			svc := old.DeepCopy()
			tc.mutate(svc)
			checkErrors(t, ValidateServiceUpdate(svc, old), tc.want)
		})
	}

	dualStack := func() *corev1.Service {
		s := kubernetesService()
		s.Spec.ClusterIPs = []string{"10.0.0.1", "fd00::1"}
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
		s.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicyPreferDualStack)
		return s
	}
	t.Run("release secondary IP without SingleStack", func(t *testing.T) {
		old := dualStack()
		svc := old.DeepCopy()
		svc.Spec.ClusterIPs, svc.Spec.IPFamilies = svc.Spec.ClusterIPs[:1], svc.Spec.IPFamilies[:1]
		checkErrors(t, ValidateServiceUpdate(svc, old), []string{
			`spec.ipFamilyPolicy: Invalid value: "PreferDualStack": must be set to 'SingleStack' when releasing the secondary clusterIP`,
			`spec.ipFamilyPolicy: Invalid value: "PreferDualStack": must be set to 'SingleStack' when releasing the secondary ipFamily`,
		})
		svc.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicySingleStack)
		checkErrors(t, ValidateServiceUpdate(svc, old), nil)
	})

	lb := func(class string) *corev1.Service {
		return userService(func(s *corev1.Service) {
			s.Spec.Type, s.Spec.LoadBalancerClass = corev1.ServiceTypeLoadBalancer, ptr(class)
			s.Spec.ExternalTrafficPolicy, s.Spec.HealthCheckNodePort = corev1.ServiceExternalTrafficPolicyLocal, 30100
		})
	}
	t.Run("load balancer class and health check port are fixed", func(t *testing.T) {
		svc := lb("example.com/other")
		svc.Spec.HealthCheckNodePort = 30101
		checkErrors(t, ValidateServiceUpdate(svc, lb("example.com/lb")), []string{
			`spec.loadBalancerClass: Invalid value: "example.com/other": may not change once set`,
			`spec.healthCheckNodePort: Forbidden: field is immutable`,
		})
	})
	t.Run("namespace is immutable", func(t *testing.T) {
		old := kubernetesService()
		svc := old.DeepCopy()
		svc.Namespace = "kube-system"
		checkErrors(t, ValidateServiceUpdate(svc, old), []string{`metadata.namespace: Invalid value: "kube-system": field is immutable`})
	})
}

func TestValidateServiceStatusUpdate(t *testing.T) {
	lb := userService(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer })
	tests := []struct {
		name    string
		svc     *corev1.Service
		ingress []corev1.LoadBalancerIngress
		want    []string
	}{
		{name: "ip and hostname", svc: lb, ingress: []corev1.LoadBalancerIngress{
			{IP: "192.0.2.1", IPMode: ptr(corev1.LoadBalancerIPModeVIP)}, {Hostname: "lb.example.com"},
		}},
		{name: "ip without ipMode (not defaulted here)", svc: lb, ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}},
		{name: "not a load balancer", svc: kubernetesService(), ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}},
			want: []string{"status.loadBalancer.ingress: Forbidden: may only be used when `spec.type` is 'LoadBalancer'"}},
		{name: "bad entries", svc: lb, ingress: []corev1.LoadBalancerIngress{
			{IP: "192.0.2.256"},
			{Hostname: "192.0.2.1", IPMode: ptr(corev1.LoadBalancerIPModeProxy)},
			{IP: "192.0.2.2", IPMode: ptr(corev1.LoadBalancerIPMode("Tunnel"))},
		}, want: []string{
			`status.loadBalancer.ingress[0].ip: Invalid value: "192.0.2.256": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`,
			"status.loadBalancer.ingress[1].ipMode: Forbidden: may not be specified when `ip` is not set",
			`status.loadBalancer.ingress[1].hostname: Invalid value: "192.0.2.1": must be a DNS name, not an IP address`,
			`status.loadBalancer.ingress[2].ipMode: Unsupported value: "Tunnel": supported values: "Proxy", "VIP"`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := tc.svc.DeepCopy()
			svc.Status.LoadBalancer.Ingress = tc.ingress
			checkErrors(t, ValidateServiceStatusUpdate(svc, tc.svc), tc.want)
		})
	}
}
