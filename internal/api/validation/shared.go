package validation

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

// fieldImmutableErrorMsg is apimachinery's "field is immutable".
const fieldImmutableErrorMsg = apimachineryvalidation.FieldImmutableErrorMsg

// strictIPs selects strict parsing for IP and CIDR fields that predate it
// (no leading zeros, no IPv4-mapped IPv6), as kube-apiserver does with its
// StrictIPCIDRValidation gate on. Values already stored are still accepted
// on update.
const strictIPs = true

// standardFinalizers are the finalizer names without a domain that
// kube-apiserver accepts.
var standardFinalizers = sets.New(
	string(corev1.FinalizerKubernetes),
	metav1.FinalizerOrphanDependents,
	metav1.FinalizerDeleteDependents,
)

// supportedPortProtocols are the protocols a service or endpoint port may use.
var supportedPortProtocols = sets.New(corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP)

func metadataPath() *field.Path { return field.NewPath("metadata") }

// validateObjectMeta is apimachinery's create-time metadata check plus
// kube-apiserver's extra rule for finalizer names (core, discovery and
// networking objects; leases use apimachinery's alone).
func validateObjectMeta(meta *metav1.ObjectMeta, namespaced bool, nameFn apimachineryvalidation.ValidateNameFunc) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(meta, namespaced, nameFn, metadataPath())
	for i := range meta.Finalizers {
		allErrs = append(allErrs, validateKubeFinalizerName(meta.Finalizers[i], metadataPath().Child("finalizers").Index(i))...)
	}
	return allErrs
}

// validateObjectMetaUpdate is the update-time counterpart of validateObjectMeta.
func validateObjectMetaUpdate(newMeta, oldMeta *metav1.ObjectMeta) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(newMeta, oldMeta, metadataPath())
	for i := range newMeta.Finalizers {
		allErrs = append(allErrs, validateKubeFinalizerName(newMeta.Finalizers[i], metadataPath().Child("finalizers").Index(i))...)
	}
	return allErrs
}

// validateFinalizerName checks a namespace spec finalizer: a qualified name,
// and domain-prefixed unless it is one of the standard ones.
func validateFinalizerName(name string, fldPath *field.Path) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateFinalizerName(name, fldPath)
	return append(allErrs, validateKubeFinalizerName(name, fldPath)...)
}

// validateKubeFinalizerName rejects unprefixed finalizer names other than
// the standard ones, so new finalizers are namespaced by their owner.
func validateKubeFinalizerName(name string, fldPath *field.Path) field.ErrorList {
	if !strings.Contains(name, "/") && !standardFinalizers.Has(name) {
		return field.ErrorList{field.Invalid(fldPath, name, "name is neither a standard finalizer name nor is it fully qualified")}
	}
	return nil
}

func validateDNS1123Label(value string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(value) {
		allErrs = append(allErrs, field.Invalid(fldPath, value, msg))
	}
	return allErrs
}

func validateDNS1123Subdomain(value string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(value) {
		allErrs = append(allErrs, field.Invalid(fldPath, value, msg))
	}
	return allErrs
}

// validateQualifiedName checks a "qualified name": an optional DNS
// subdomain prefix and a name, as label keys and appProtocol values.
func validateQualifiedName(value string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range content.IsLabelKey(value) {
		allErrs = append(allErrs, field.Invalid(fldPath, value, msg))
	}
	return allErrs
}

// validateNodeName checks a node name reference (a DNS subdomain).
func validateNodeName(name string, fldPath *field.Path) field.ErrorList {
	return validateDNS1123Subdomain(name, fldPath)
}

// validatePortNumOrName checks a port given as a number or an IANA name.
func validatePortNumOrName(port intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	switch port.Type {
	case intstr.Int:
		for _, msg := range validation.IsValidPortNum(port.IntValue()) {
			allErrs = append(allErrs, field.Invalid(fldPath, port.IntValue(), msg))
		}
	case intstr.String:
		for _, msg := range validation.IsValidPortName(port.StrVal) {
			allErrs = append(allErrs, field.Invalid(fldPath, port.StrVal, msg))
		}
	default:
		allErrs = append(allErrs, field.InternalError(fldPath, fmt.Errorf("unknown type: %v", port.Type)))
	}
	return allErrs
}

// validateProtocol checks a required port protocol.
func validateProtocol(protocol corev1.Protocol, fldPath *field.Path) field.ErrorList {
	if protocol == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	if !supportedPortProtocols.Has(protocol) {
		return field.ErrorList{field.NotSupported(fldPath, protocol, sets.List(supportedPortProtocols))}
	}
	return nil
}

// validateLegacyIP checks an IP in a field that has always accepted
// non-canonical forms; validOld lists values of the old object that are
// accepted as they are, so stored objects stay updatable.
func validateLegacyIP(fldPath *field.Path, value string, validOld []string) field.ErrorList {
	return validation.IsValidIPForLegacyField(fldPath, value, strictIPs, validOld)
}

// validateLegacyCIDR is validateLegacyIP for CIDR values.
func validateLegacyCIDR(fldPath *field.Path, value string, validOld []string) field.ErrorList {
	return validation.IsValidCIDRForLegacyField(fldPath, value, strictIPs, validOld)
}

// validateEndpointIP rejects addresses a backend can never have: the
// unspecified address, loopback and link-local ranges (the last are used
// for node-local services such as cloud metadata). The caller has already
// checked that ip parses.
func validateEndpointIP(ip string, fldPath *field.Path) field.ErrorList {
	parsed := netutils.ParseIPSloppy(ip)
	if parsed == nil {
		return nil
	}
	var allErrs field.ErrorList
	if parsed.IsUnspecified() {
		allErrs = append(allErrs, field.Invalid(fldPath, ip, fmt.Sprintf("may not be unspecified (%v)", ip)))
	}
	if parsed.IsLoopback() {
		allErrs = append(allErrs, field.Invalid(fldPath, ip, "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
	}
	if parsed.IsLinkLocalUnicast() {
		allErrs = append(allErrs, field.Invalid(fldPath, ip, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
	}
	if parsed.IsLinkLocalMulticast() {
		allErrs = append(allErrs, field.Invalid(fldPath, ip, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"))
	}
	return allErrs
}

// validateImmutable reports newVal if it differs from oldVal.
func validateImmutable(newVal, oldVal any, fldPath *field.Path) field.ErrorList {
	return apimachineryvalidation.ValidateImmutableField(newVal, oldVal, fldPath)
}
