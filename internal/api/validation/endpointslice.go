package validation

import (
	"reflect"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

// EndpointSlice size limits, as kube-apiserver's. The ports limit is the
// enforced one (20000); the API documentation still says 100.
const (
	maxSliceEndpoints = 1000
	maxSlicePorts     = 20000
	maxSliceAddresses = 100
	maxTopologyLabels = 16
	maxZoneHints      = 8
	maxNodeHints      = 8
)

var supportedAddressTypes = sets.New(discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN)

// ValidateEndpointSlice validates an EndpointSlice on create: a DNS
// subdomain name, a known address type, addresses of that type, and the
// size limits (1000 endpoints, 100 addresses each, 20000 ports).
func ValidateEndpointSlice(s *discoveryv1.EndpointSlice) field.ErrorList {
	return validateEndpointSlice(s, nil)
}

// ValidateEndpointSliceUpdate validates an update of an EndpointSlice. The
// address type is fixed; endpoints left as stored are not re-checked, so
// slices written under older rules stay updatable.
func ValidateEndpointSliceUpdate(newS, oldS *discoveryv1.EndpointSlice) field.ErrorList {
	allErrs := validateEndpointSlice(newS, oldS)
	return append(allErrs, validateImmutable(newS.AddressType, oldS.AddressType, field.NewPath("addressType"))...)
}

func validateEndpointSlice(s, old *discoveryv1.EndpointSlice) field.ErrorList {
	var allErrs field.ErrorList
	if old != nil {
		allErrs = validateObjectMetaUpdate(&s.ObjectMeta, &old.ObjectMeta)
	}
	allErrs = append(allErrs, validateObjectMeta(&s.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain)...)
	addrPath := field.NewPath("addressType")
	if s.AddressType == "" {
		allErrs = append(allErrs, field.Required(addrPath, ""))
	} else if !supportedAddressTypes.Has(s.AddressType) {
		allErrs = append(allErrs, field.NotSupported(addrPath, s.AddressType, sets.List(supportedAddressTypes)))
	}
	if old == nil || !reflect.DeepEqual(s.Endpoints, old.Endpoints) {
		allErrs = append(allErrs, validateSliceEndpoints(s.Endpoints, s.AddressType, field.NewPath("endpoints"))...)
	}
	return append(allErrs, validateSlicePorts(s.Ports, field.NewPath("ports"))...)
}

func validateSliceEndpoints(endpoints []discoveryv1.Endpoint, addrType discoveryv1.AddressType, fldPath *field.Path) field.ErrorList {
	if len(endpoints) > maxSliceEndpoints {
		return field.ErrorList{field.TooMany(fldPath, len(endpoints), maxSliceEndpoints)}
	}
	var allErrs field.ErrorList
	for i := range endpoints {
		ep := &endpoints[i]
		idxPath := fldPath.Index(i)
		addressesPath := idxPath.Child("addresses")
		if len(ep.Addresses) == 0 {
			allErrs = append(allErrs, field.Required(addressesPath, "must contain at least 1 address"))
		} else if len(ep.Addresses) > maxSliceAddresses {
			allErrs = append(allErrs, field.TooMany(addressesPath, len(ep.Addresses), maxSliceAddresses))
		}
		for j, address := range ep.Addresses {
			allErrs = append(allErrs, validateSliceAddress(address, addrType, addressesPath.Index(j))...)
		}
		if ep.NodeName != nil {
			allErrs = append(allErrs, validateNodeName(*ep.NodeName, idxPath.Child("nodeName"))...)
		}
		topologyPath := idxPath.Child("deprecatedTopology")
		if len(ep.DeprecatedTopology) > maxTopologyLabels {
			allErrs = append(allErrs, field.TooMany(topologyPath, len(ep.DeprecatedTopology), maxTopologyLabels))
		}
		allErrs = append(allErrs, metav1validation.ValidateLabels(ep.DeprecatedTopology, topologyPath)...)
		if ep.Hostname != nil {
			allErrs = append(allErrs, validateDNS1123Label(*ep.Hostname, idxPath.Child("hostname"))...)
		}
		if ep.Hints != nil {
			allErrs = append(allErrs, validateSliceHints(ep.Hints, idxPath.Child("hints"))...)
		}
	}
	return allErrs
}

// validateSliceAddress checks one address against the slice's type; other
// (unknown) types were reported already and are not looked into.
func validateSliceAddress(address string, addrType discoveryv1.AddressType, fldPath *field.Path) field.ErrorList {
	switch addrType {
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
		if errs := validateLegacyIP(fldPath, address, nil); len(errs) != 0 {
			return errs
		}
		if isIPv6 := netutils.IsIPv6String(address); isIPv6 != (addrType == discoveryv1.AddressTypeIPv6) {
			return field.ErrorList{field.Invalid(fldPath, address, "must be an "+string(addrType)+" address")}
		}
		return validateEndpointIP(address, fldPath)
	case discoveryv1.AddressTypeFQDN:
		return validation.IsFullyQualifiedDomainName(fldPath, address)
	}
	return nil
}

func validateSliceHints(hints *discoveryv1.EndpointHints, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	zonesPath := fldPath.Child("forZones")
	if len(hints.ForZones) > maxZoneHints {
		allErrs = append(allErrs, field.TooMany(zonesPath, len(hints.ForZones), maxZoneHints))
	} else {
		zones := sets.New[string]()
		for i, z := range hints.ForZones {
			namePath := zonesPath.Index(i).Child("name")
			if zones.Has(z.Name) {
				allErrs = append(allErrs, field.Duplicate(namePath, z.Name))
			} else {
				zones.Insert(z.Name)
			}
			for _, msg := range content.IsLabelValue(z.Name) {
				allErrs = append(allErrs, field.Invalid(namePath, z.Name, msg))
			}
		}
	}
	nodesPath := fldPath.Child("forNodes")
	if len(hints.ForNodes) > maxNodeHints {
		return append(allErrs, field.TooMany(nodesPath, len(hints.ForNodes), maxNodeHints))
	}
	nodes := sets.New[string]()
	for i, n := range hints.ForNodes {
		namePath := nodesPath.Index(i).Child("name")
		if nodes.Has(n.Name) {
			allErrs = append(allErrs, field.Duplicate(namePath, n.Name))
		} else {
			nodes.Insert(n.Name)
		}
		allErrs = append(allErrs, validateNodeName(n.Name, namePath)...)
	}
	return allErrs
}

// validateSlicePorts checks the ports; names must be unique, the empty
// name included, since consumers match ports to services by name.
func validateSlicePorts(ports []discoveryv1.EndpointPort, fldPath *field.Path) field.ErrorList {
	if len(ports) > maxSlicePorts {
		return field.ErrorList{field.TooMany(fldPath, len(ports), maxSlicePorts)}
	}
	var allErrs field.ErrorList
	names := sets.New[string]()
	for i, port := range ports {
		idxPath := fldPath.Index(i)
		name := ""
		if port.Name != nil {
			name = *port.Name
		}
		if name != "" {
			allErrs = append(allErrs, validateDNS1123Label(name, idxPath.Child("name"))...)
		}
		if names.Has(name) {
			allErrs = append(allErrs, field.Duplicate(idxPath.Child("name"), name))
		} else {
			names.Insert(name)
		}
		if port.Protocol == nil {
			allErrs = append(allErrs, field.Required(idxPath.Child("protocol"), ""))
		} else if !supportedPortProtocols.Has(*port.Protocol) {
			allErrs = append(allErrs, field.NotSupported(idxPath.Child("protocol"), *port.Protocol, sets.List(supportedPortProtocols)))
		}
		if port.AppProtocol != nil {
			allErrs = append(allErrs, validateQualifiedName(*port.AppProtocol, idxPath.Child("appProtocol"))...)
		}
	}
	return allErrs
}
