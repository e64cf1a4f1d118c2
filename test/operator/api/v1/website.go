// Package v1 is the sample operator's first version of Website, served
// still and converted to and from the v2 hub by the operator's conversion
// webhook.
package v1

import (
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/conversion"
	"sigs.k8s.io/controller-runtime/pkg/scheme"

	v2 "github.com/kubeboot/kubeboot/test/operator/api/v2"
)

// GroupVersion is sample.kubeboot.test/v1.
var GroupVersion = schema.GroupVersion{Group: "sample.kubeboot.test", Version: "v1"}

var schemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

// AddToScheme adds this version's types to a scheme.
var AddToScheme = schemeBuilder.AddToScheme

func init() { schemeBuilder.Register(&Website{}, &WebsiteList{}) }

// WebsiteSpec is v1's flat spec: v2 moved the image into a container.
type WebsiteSpec struct {
	Replicas int32  `json:"replicas"`
	Image    string `json:"image"`
}

// WebsiteStatus is what the controller saw.
type WebsiteStatus struct {
	ConfigMap string `json:"configMap,omitempty"`
}

// Website is v1 of the sample operator's kind.
type Website struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WebsiteSpec   `json:"spec,omitempty"`
	Status WebsiteStatus `json:"status,omitempty"`
}

// portAnnotation keeps v2's container port on a v1 object, so that a v2
// object read as v1 and written back loses nothing.
const portAnnotation = "sample.kubeboot.test/port"

var _ conversion.Convertible = &Website{}

// ConvertTo converts this Website to the hub version.
func (src *Website) ConvertTo(dstRaw conversion.Hub) error {
	dst := dstRaw.(*v2.Website)
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Spec.Replicas = src.Spec.Replicas
	dst.Spec.Container.Image = src.Spec.Image
	if p, ok := dst.Annotations[portAnnotation]; ok {
		port, err := strconv.ParseInt(p, 10, 32)
		if err != nil {
			return fmt.Errorf("annotation %s: %w", portAnnotation, err)
		}
		dst.Spec.Container.Port = int32(port)
		delete(dst.Annotations, portAnnotation)
		if len(dst.Annotations) == 0 {
			dst.Annotations = nil
		}
	}
	dst.Status.ConfigMap = src.Status.ConfigMap
	return nil
}

// ConvertFrom converts from the hub version to this one.
func (dst *Website) ConvertFrom(srcRaw conversion.Hub) error {
	src := srcRaw.(*v2.Website)
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Spec.Replicas = src.Spec.Replicas
	dst.Spec.Image = src.Spec.Container.Image
	if src.Spec.Container.Port != 0 {
		if dst.Annotations == nil {
			dst.Annotations = map[string]string{}
		}
		dst.Annotations[portAnnotation] = strconv.Itoa(int(src.Spec.Container.Port))
	}
	dst.Status.ConfigMap = src.Status.ConfigMap
	return nil
}

// WebsiteList is a list of Websites.
type WebsiteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Website `json:"items"`
}

// DeepCopyInto copies in into out.
func (in *Website) DeepCopyInto(out *Website) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
}

// DeepCopy returns a copy of in.
func (in *Website) DeepCopy() *Website {
	if in == nil {
		return nil
	}
	out := new(Website)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *Website) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyObject implements runtime.Object.
func (in *WebsiteList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := &WebsiteList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Website, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}
