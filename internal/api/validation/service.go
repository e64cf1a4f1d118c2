package validation

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

// maxClientIPAffinitySeconds caps sessionAffinityConfig.clientIP.timeoutSeconds
// (one day), as kube-apiserver.
const maxClientIPAffinitySeconds = 86400

var (
	supportedSessionAffinities       = sets.New(corev1.ServiceAffinityClientIP, corev1.ServiceAffinityNone)
	supportedServiceTypes            = sets.New(corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName)
	supportedInternalTrafficPolicies = sets.New(corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal)
	supportedExternalTrafficPolicies = sets.New(corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal)
	supportedLoadBalancerIPModes     = sets.New(corev1.LoadBalancerIPModeVIP, corev1.LoadBalancerIPModeProxy)
	// In kube-apiserver's order, which its message keeps (it is not sorted).
	supportedTrafficDistributions = []string{
		corev1.ServiceTrafficDistributionPreferClose,
		corev1.ServiceTrafficDistributionPreferSameZone,
		corev1.ServiceTrafficDistributionPreferSameNode,
	}
)

// servicePortKey mirrors the field names of kube-apiserver's internal
// ServicePort, which it prints (as JSON, without tags) in the duplicate
// port message.
type servicePortKey struct {
	Name        string
	Protocol    corev1.Protocol
	AppProtocol *string
	Port        int32
	TargetPort  intstr.IntOrString
	NodePort    int32
}

// ValidateService validates a Service on create. Service names are
// DNS-1123 labels (kube-apiserver's relaxed service name rule). ClusterIPs,
// IPFamilies and IPFamilyPolicy are checked when present; the registry
// fills them in while allocating.
func ValidateService(svc *corev1.Service) field.ErrorList {
	return validateService(svc, nil)
}

// ValidateServiceMetadata validates a new Service's metadata alone. The
// allocators run before the full validation (which needs the allocated
// values) and record the Service's name, so a bad name must be refused
// first.
func ValidateServiceMetadata(svc *corev1.Service) field.ErrorList {
	return validateObjectMeta(&svc.ObjectMeta, true, apimachineryvalidation.NameIsDNSLabel)
}

// ValidateServiceUpdate validates an update of a Service: everything
// ValidateService checks, plus what may not change (the primary cluster IP
// and IP family, the load balancer class, the health check node port).
func ValidateServiceUpdate(newSvc, oldSvc *corev1.Service) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newSvc.ObjectMeta, &oldSvc.ObjectMeta)
	allErrs = append(allErrs, validateUpgradeDowngradeClusterIPs(oldSvc, newSvc)...)
	allErrs = append(allErrs, validateUpgradeDowngradeIPFamilies(oldSvc, newSvc)...)
	allErrs = append(allErrs, validateLoadBalancerClass(oldSvc, newSvc)...)
	if needsHealthCheck(oldSvc) && needsHealthCheck(newSvc) && newSvc.Spec.HealthCheckNodePort != oldSvc.Spec.HealthCheckNodePort {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("spec", "healthCheckNodePort"), "field is immutable"))
	}
	return append(allErrs, validateService(newSvc, oldSvc)...)
}

// ValidateServiceStatusUpdate validates an update of the status
// subresource: the load balancer ingress points.
func ValidateServiceStatusUpdate(newSvc, oldSvc *corev1.Service) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newSvc.ObjectMeta, &oldSvc.ObjectMeta)
	return append(allErrs, validateLoadBalancerStatus(&newSvc.Status.LoadBalancer, &oldSvc.Status.LoadBalancer, &newSvc.Spec, field.NewPath("status", "loadBalancer"))...)
}

// validateService checks a service; old is nil on create and lets stored
// non-canonical IPs and CIDRs through on update.
func validateService(svc, old *corev1.Service) field.ErrorList {
	allErrs := validateObjectMeta(&svc.ObjectMeta, true, apimachineryvalidation.NameIsDNSLabel)
	spec := &svc.Spec
	specPath := field.NewPath("spec")
	annotationsPath := metadataPath().Child("annotations")

	hintsVal, hintsSet := svc.Annotations[corev1.DeprecatedAnnotationTopologyAwareHints]
	modeVal, modeSet := svc.Annotations[corev1.AnnotationTopologyMode]
	if hintsSet && modeSet && hintsVal != modeVal {
		allErrs = append(allErrs, field.Invalid(annotationsPath.Key(corev1.AnnotationTopologyMode), modeVal,
			fmt.Sprintf("must match annotations[%s] when both are specified", corev1.DeprecatedAnnotationTopologyAwareHints)))
	}

	headless := isHeadlessService(svc)
	if len(spec.Ports) == 0 && !headless && spec.Type != corev1.ServiceTypeExternalName {
		allErrs = append(allErrs, field.Required(specPath.Child("ports"), ""))
	}

	switch spec.Type {
	case corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort:
		if headless {
			allErrs = append(allErrs, field.Invalid(primaryClusterIPPath(svc), corev1.ClusterIPNone,
				fmt.Sprintf("may not be set to 'None' for %s services", spec.Type)))
		}
	case corev1.ServiceTypeExternalName:
		allErrs = append(allErrs, validateExternalNameService(svc, specPath)...)
	}

	portNames := sets.New[string]()
	portsPath := specPath.Child("ports")
	for i := range spec.Ports {
		allErrs = append(allErrs, validateServicePort(&spec.Ports[i], len(spec.Ports) > 1, portNames, portsPath.Index(i))...)
	}

	if spec.Selector != nil {
		allErrs = append(allErrs, metav1validation.ValidateLabels(spec.Selector, specPath.Child("selector"))...)
	}

	allErrs = append(allErrs, validateSessionAffinity(spec, specPath)...)
	allErrs = append(allErrs, validateClusterIPsRelatedFields(svc, old)...)

	var oldExternalIPs []string
	if old != nil {
		oldExternalIPs = old.Spec.ExternalIPs
	}
	for i, ip := range spec.ExternalIPs {
		idxPath := specPath.Child("externalIPs").Index(i)
		if errs := validateLegacyIP(idxPath, ip, oldExternalIPs); len(errs) != 0 {
			allErrs = append(allErrs, errs...)
		} else {
			allErrs = append(allErrs, validateEndpointIP(ip, idxPath)...)
		}
	}

	if spec.Type == "" {
		allErrs = append(allErrs, field.Required(specPath.Child("type"), ""))
	} else if !supportedServiceTypes.Has(spec.Type) {
		allErrs = append(allErrs, field.NotSupported(specPath.Child("type"), spec.Type, sets.List(supportedServiceTypes)))
	}

	allErrs = append(allErrs, validateServicePortSet(spec, portsPath)...)
	allErrs = append(allErrs, validateLoadBalancerSourceRanges(svc, old)...)

	if spec.AllocateLoadBalancerNodePorts != nil && spec.Type != corev1.ServiceTypeLoadBalancer {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("allocateLoadBalancerNodePorts"), "may only be used when `type` is 'LoadBalancer'"))
	}
	if spec.Type == corev1.ServiceTypeLoadBalancer && spec.AllocateLoadBalancerNodePorts == nil {
		// kube-apiserver reports this path without "spec."; defaulting
		// makes it unreachable in practice.
		allErrs = append(allErrs, field.Required(field.NewPath("allocateLoadBalancerNodePorts"), ""))
	}

	allErrs = append(allErrs, validateLoadBalancerClass(nil, svc)...)
	allErrs = append(allErrs, validateExternalTrafficPolicy(svc)...)
	allErrs = append(allErrs, validateInternalTrafficPolicy(spec)...)
	if td := spec.TrafficDistribution; td != nil && !sets.New(supportedTrafficDistributions...).Has(*td) {
		allErrs = append(allErrs, field.NotSupported(specPath.Child("trafficDistribution"), *td, supportedTrafficDistributions))
	}
	return allErrs
}

// validateServicePort checks one port. Names are required when there are
// several ports, so endpoints and DNS SRV records can tell them apart.
func validateServicePort(sp *corev1.ServicePort, requireName bool, names sets.Set[string], fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if requireName && sp.Name == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), ""))
	} else if sp.Name != "" {
		allErrs = append(allErrs, validateDNS1123Label(sp.Name, fldPath.Child("name"))...)
		if names.Has(sp.Name) {
			allErrs = append(allErrs, field.Duplicate(fldPath.Child("name"), sp.Name))
		} else {
			names.Insert(sp.Name)
		}
	}
	for _, msg := range validation.IsValidPortNum(int(sp.Port)) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("port"), sp.Port, msg))
	}
	allErrs = append(allErrs, validateProtocol(sp.Protocol, fldPath.Child("protocol"))...)
	// Headless services ignore targetPort, but v1 has always accepted one.
	allErrs = append(allErrs, validatePortNumOrName(sp.TargetPort, fldPath.Child("targetPort"))...)
	if sp.AppProtocol != nil {
		allErrs = append(allErrs, validateQualifiedName(*sp.AppProtocol, fldPath.Child("appProtocol"))...)
	}
	// Only the shape of a node port is checked here; whether it is in the
	// node port range and free is the allocator's call.
	if sp.NodePort != 0 {
		for _, msg := range validation.IsValidPortNum(int(sp.NodePort)) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("nodePort"), sp.NodePort, msg))
		}
	}
	return allErrs
}

// validateServicePortSet checks rules across ports: no node ports on
// ClusterIP services, and no (protocol, port) or (protocol, nodePort)
// pair twice.
func validateServicePortSet(spec *corev1.ServiceSpec, portsPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if spec.Type == corev1.ServiceTypeClusterIP {
		for i := range spec.Ports {
			if spec.Ports[i].NodePort != 0 {
				allErrs = append(allErrs, field.Forbidden(portsPath.Index(i).Child("nodePort"), "may not be used when `type` is 'ClusterIP'"))
			}
		}
	}
	nodePorts := sets.New[servicePortKey]()
	for i, port := range spec.Ports {
		if port.NodePort == 0 {
			continue
		}
		key := servicePortKey{Protocol: port.Protocol, NodePort: port.NodePort}
		if nodePorts.Has(key) {
			allErrs = append(allErrs, field.Duplicate(portsPath.Index(i).Child("nodePort"), port.NodePort))
		}
		nodePorts.Insert(key)
	}
	ports := sets.New[servicePortKey]()
	for i, port := range spec.Ports {
		key := servicePortKey{Protocol: port.Protocol, Port: port.Port}
		if ports.Has(key) {
			allErrs = append(allErrs, field.Duplicate(portsPath.Index(i), key))
		}
		ports.Insert(key)
	}
	return allErrs
}

// validateExternalNameService checks that an ExternalName service, a DNS
// CNAME, has a valid name to point at and no IP settings.
func validateExternalNameService(svc *corev1.Service, specPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	spec := &svc.Spec
	if len(spec.ClusterIPs) > 0 {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("clusterIPs"), "may not be set for ExternalName services"))
	} else if spec.ClusterIP != "" {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("clusterIP"), "may not be set for ExternalName services"))
	}
	if len(spec.IPFamilies) > 0 {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("ipFamilies"), "may not be set for ExternalName services"))
	}
	if spec.IPFamilyPolicy != nil {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("ipFamilyPolicy"), "may not be set for ExternalName services"))
	}
	// A trailing dot marks the name fully qualified.
	cname := strings.TrimSuffix(spec.ExternalName, ".")
	if cname == "" {
		allErrs = append(allErrs, field.Required(specPath.Child("externalName"), ""))
	} else {
		allErrs = append(allErrs, validateDNS1123Subdomain(cname, specPath.Child("externalName"))...)
	}
	return allErrs
}

func validateSessionAffinity(spec *corev1.ServiceSpec, specPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if spec.SessionAffinity == "" {
		allErrs = append(allErrs, field.Required(specPath.Child("sessionAffinity"), ""))
	} else if !supportedSessionAffinities.Has(spec.SessionAffinity) {
		allErrs = append(allErrs, field.NotSupported(specPath.Child("sessionAffinity"), spec.SessionAffinity, sets.List(supportedSessionAffinities)))
	}
	configPath := specPath.Child("sessionAffinityConfig")
	switch spec.SessionAffinity {
	case corev1.ServiceAffinityClientIP:
		detail := fmt.Sprintf("when session affinity type is %s", corev1.ServiceAffinityClientIP)
		cfg := spec.SessionAffinityConfig
		switch {
		case cfg == nil:
			allErrs = append(allErrs, field.Required(configPath, detail))
		case cfg.ClientIP == nil:
			allErrs = append(allErrs, field.Required(configPath.Child("clientIP"), detail))
		case cfg.ClientIP.TimeoutSeconds == nil:
			allErrs = append(allErrs, field.Required(configPath.Child("clientIP", "timeoutSeconds"), detail))
		default:
			if t := *cfg.ClientIP.TimeoutSeconds; t <= 0 || t > maxClientIPAffinitySeconds {
				allErrs = append(allErrs, field.Invalid(configPath.Child("clientIP", "timeoutSeconds"), t,
					fmt.Sprintf("must be greater than 0 and less than %d", maxClientIPAffinitySeconds)))
			}
		}
	case corev1.ServiceAffinityNone:
		if spec.SessionAffinityConfig != nil {
			allErrs = append(allErrs, field.Forbidden(configPath, fmt.Sprintf("must not be set when session affinity is %s", corev1.ServiceAffinityNone)))
		}
	}
	return allErrs
}

// validateLoadBalancerSourceRanges checks the firewall ranges, given in the
// field or, for old clients, the annotation; the field wins.
func validateLoadBalancerSourceRanges(svc, old *corev1.Service) field.ErrorList {
	var allErrs field.ErrorList
	var oldRanges []string
	if old != nil {
		oldRanges = old.Spec.LoadBalancerSourceRanges
	}
	isLB := svc.Spec.Type == corev1.ServiceTypeLoadBalancer
	if len(svc.Spec.LoadBalancerSourceRanges) > 0 {
		// Capitalised in kube-apiserver's field path; kept for parity.
		fldPath := field.NewPath("spec", "LoadBalancerSourceRanges")
		if !isLB {
			allErrs = append(allErrs, field.Forbidden(fldPath, "may only be used when `type` is 'LoadBalancer'"))
		}
		for i, value := range svc.Spec.LoadBalancerSourceRanges {
			// Space padding is tolerated, a leftover of the annotation.
			allErrs = append(allErrs, validateLegacyCIDR(fldPath.Index(i), strings.TrimSpace(value), oldRanges)...)
		}
	} else if val, ok := svc.Annotations[corev1.AnnotationLoadBalancerSourceRangesKey]; ok {
		fldPath := metadataPath().Child("annotations").Key(corev1.AnnotationLoadBalancerSourceRangesKey)
		if !isLB {
			allErrs = append(allErrs, field.Forbidden(fldPath, "may only be used when `type` is 'LoadBalancer'"))
		}
		if val = strings.TrimSpace(val); val != "" {
			for _, value := range strings.Split(val, ",") {
				allErrs = append(allErrs, validateLegacyCIDR(fldPath, strings.TrimSpace(value), nil)...)
			}
		}
	}
	return allErrs
}

// validateLoadBalancerClass checks spec.loadBalancerClass: only on
// LoadBalancer services, a qualified name, and fixed while the service
// stays a LoadBalancer (the controller that owns it would change).
func validateLoadBalancerClass(old, svc *corev1.Service) field.ErrorList {
	var allErrs field.ErrorList
	fldPath := field.NewPath("spec", "loadBalancerClass")
	isLB := svc.Spec.Type == corev1.ServiceTypeLoadBalancer
	if old != nil {
		if old.Spec.Type == corev1.ServiceTypeLoadBalancer && isLB && !sameString(old.Spec.LoadBalancerClass, svc.Spec.LoadBalancerClass) {
			allErrs = append(allErrs, field.Invalid(fldPath, svc.Spec.LoadBalancerClass, "may not change once set"))
		}
	}
	if svc.Spec.LoadBalancerClass != nil {
		if isLB {
			allErrs = append(allErrs, validateQualifiedName(*svc.Spec.LoadBalancerClass, fldPath)...)
		} else {
			allErrs = append(allErrs, field.Forbidden(fldPath, "may only be used when `type` is 'LoadBalancer'"))
		}
	}
	return allErrs
}

// validateExternalTrafficPolicy checks externalTrafficPolicy and
// healthCheckNodePort, which only mean something for traffic from outside.
func validateExternalTrafficPolicy(svc *corev1.Service) field.ErrorList {
	var allErrs field.ErrorList
	spec := &svc.Spec
	specPath := field.NewPath("spec")
	if !externallyAccessible(svc) {
		if spec.ExternalTrafficPolicy != "" {
			allErrs = append(allErrs, field.Invalid(specPath.Child("externalTrafficPolicy"), spec.ExternalTrafficPolicy,
				"may only be set for externally-accessible services"))
		}
	} else if spec.ExternalTrafficPolicy == "" {
		// Our defaulting fills it for NodePort and LoadBalancer only, so a
		// ClusterIP service with external IPs may leave it empty.
		if spec.Type != corev1.ServiceTypeClusterIP {
			allErrs = append(allErrs, field.Required(specPath.Child("externalTrafficPolicy"), ""))
		}
	} else if !supportedExternalTrafficPolicies.Has(spec.ExternalTrafficPolicy) {
		allErrs = append(allErrs, field.NotSupported(specPath.Child("externalTrafficPolicy"), spec.ExternalTrafficPolicy, sets.List(supportedExternalTrafficPolicies)))
	}

	hcPath := specPath.Child("healthCheckNodePort")
	if !needsHealthCheck(svc) {
		if spec.HealthCheckNodePort != 0 {
			allErrs = append(allErrs, field.Invalid(hcPath, spec.HealthCheckNodePort,
				"may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
		}
	} else if spec.HealthCheckNodePort != 0 {
		// Zero is left for the allocator to fill in.
		for _, msg := range validation.IsValidPortNum(int(spec.HealthCheckNodePort)) {
			allErrs = append(allErrs, field.Invalid(hcPath, spec.HealthCheckNodePort, msg))
		}
	}
	return allErrs
}

func validateInternalTrafficPolicy(spec *corev1.ServiceSpec) field.ErrorList {
	fldPath := field.NewPath("spec", "internalTrafficPolicy")
	if spec.InternalTrafficPolicy == nil {
		// Other types tolerate nil for compatibility with stored objects.
		switch spec.Type {
		case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
			return field.ErrorList{field.Required(fldPath, "")}
		}
		return nil
	}
	if !supportedInternalTrafficPolicies.Has(*spec.InternalTrafficPolicy) {
		return field.ErrorList{field.NotSupported(fldPath, *spec.InternalTrafficPolicy, sets.List(supportedInternalTrafficPolicies))}
	}
	return nil
}

// validateLoadBalancerStatus checks the ingress points a load balancer
// controller reports.
func validateLoadBalancerStatus(status, old *corev1.LoadBalancerStatus, spec *corev1.ServiceSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	ingressPath := fldPath.Child("ingress")
	if spec.Type != corev1.ServiceTypeLoadBalancer && len(status.Ingress) != 0 {
		return field.ErrorList{field.Forbidden(ingressPath, "may only be used when `spec.type` is 'LoadBalancer'")}
	}
	var oldIPs []string
	for _, ing := range old.Ingress {
		oldIPs = append(oldIPs, ing.IP)
	}
	for i, ing := range status.Ingress {
		idxPath := ingressPath.Index(i)
		if ing.IP != "" {
			allErrs = append(allErrs, validateLegacyIP(idxPath.Child("ip"), ing.IP, oldIPs)...)
		}
		// kube-apiserver's defaulting sets ipMode to VIP when ip is set and
		// its validation then requires it; ours doesn't default it, so a
		// missing ipMode is accepted.
		if ing.IPMode != nil {
			if ing.IP == "" {
				allErrs = append(allErrs, field.Forbidden(idxPath.Child("ipMode"), "may not be specified when `ip` is not set"))
			} else if !supportedLoadBalancerIPModes.Has(*ing.IPMode) {
				allErrs = append(allErrs, field.NotSupported(idxPath.Child("ipMode"), *ing.IPMode, sets.List(supportedLoadBalancerIPModes)))
			}
		}
		if ing.Hostname != "" {
			allErrs = append(allErrs, validateDNS1123Subdomain(ing.Hostname, idxPath.Child("hostname"))...)
			if netutils.ParseIPSloppy(ing.Hostname) != nil {
				allErrs = append(allErrs, field.Invalid(idxPath.Child("hostname"), ing.Hostname, "must be a DNS name, not an IP address"))
			}
		}
	}
	return allErrs
}

// externallyAccessible reports whether traffic can reach the service from
// outside the cluster.
func externallyAccessible(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer ||
		svc.Spec.Type == corev1.ServiceTypeNodePort ||
		(svc.Spec.Type == corev1.ServiceTypeClusterIP && len(svc.Spec.ExternalIPs) > 0)
}

// needsHealthCheck reports whether the service gets a health check node
// port: load balancers that keep traffic on the receiving node.
func needsHealthCheck(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

func sameString(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
