package validation

import (
	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateEndpoints validates Endpoints on create. The name is a DNS
// subdomain, as in kube-apiserver (the endpoints controller names them
// after their service); each subset needs an address, and addresses must be
// usable backend IPs.
func ValidateEndpoints(e *corev1.Endpoints) field.ErrorList {
	allErrs := validateObjectMeta(&e.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain)
	return append(allErrs, validateEndpointSubsets(e.Subsets, nil, field.NewPath("subsets"))...)
}

// ValidateEndpointsUpdate validates an update of Endpoints. Node names may
// change (a reused node IP or pod CIDR moves an address to another node),
// and stored IPs in a now-disallowed form are still accepted.
func ValidateEndpointsUpdate(newE, oldE *corev1.Endpoints) field.ErrorList {
	allErrs := validateObjectMetaUpdate(&newE.ObjectMeta, &oldE.ObjectMeta)
	var oldIPs []string
	for _, ss := range oldE.Subsets {
		for _, a := range ss.Addresses {
			oldIPs = append(oldIPs, a.IP)
		}
		for _, a := range ss.NotReadyAddresses {
			oldIPs = append(oldIPs, a.IP)
		}
	}
	allErrs = append(allErrs, validateObjectMeta(&newE.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain)...)
	return append(allErrs, validateEndpointSubsets(newE.Subsets, oldIPs, field.NewPath("subsets"))...)
}

func validateEndpointSubsets(subsets []corev1.EndpointSubset, oldIPs []string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i := range subsets {
		ss := &subsets[i]
		idxPath := fldPath.Index(i)
		// Ports may be empty (headless services), addresses may not.
		if len(ss.Addresses) == 0 && len(ss.NotReadyAddresses) == 0 {
			allErrs = append(allErrs, field.Required(idxPath, "must specify `addresses` or `notReadyAddresses`"))
		}
		for j := range ss.Addresses {
			allErrs = append(allErrs, validateEndpointAddress(&ss.Addresses[j], oldIPs, idxPath.Child("addresses").Index(j))...)
		}
		for j := range ss.NotReadyAddresses {
			allErrs = append(allErrs, validateEndpointAddress(&ss.NotReadyAddresses[j], oldIPs, idxPath.Child("notReadyAddresses").Index(j))...)
		}
		for j := range ss.Ports {
			allErrs = append(allErrs, validateEndpointPort(&ss.Ports[j], len(ss.Ports) > 1, idxPath.Child("ports").Index(j))...)
		}
	}
	return allErrs
}

func validateEndpointAddress(addr *corev1.EndpointAddress, oldIPs []string, fldPath *field.Path) field.ErrorList {
	ipPath := fldPath.Child("ip")
	allErrs := validateLegacyIP(ipPath, addr.IP, oldIPs)
	if len(allErrs) == 0 {
		allErrs = append(allErrs, validateEndpointIP(addr.IP, ipPath)...)
	}
	if addr.Hostname != "" {
		allErrs = append(allErrs, validateDNS1123Label(addr.Hostname, fldPath.Child("hostname"))...)
	}
	if addr.NodeName != nil {
		allErrs = append(allErrs, validateNodeName(*addr.NodeName, fldPath.Child("nodeName"))...)
	}
	return allErrs
}

// validateEndpointPort checks a port; like service ports, they need names
// when there are several. Unlike service ports, names may repeat.
func validateEndpointPort(port *corev1.EndpointPort, requireName bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if requireName && port.Name == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), ""))
	} else if port.Name != "" {
		allErrs = append(allErrs, validateDNS1123Label(port.Name, fldPath.Child("name"))...)
	}
	for _, msg := range validation.IsValidPortNum(int(port.Port)) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("port"), port.Port, msg))
	}
	allErrs = append(allErrs, validateProtocol(port.Protocol, fldPath.Child("protocol"))...)
	if port.AppProtocol != nil {
		allErrs = append(allErrs, validateQualifiedName(*port.AppProtocol, fldPath.Child("appProtocol"))...)
	}
	return allErrs
}
