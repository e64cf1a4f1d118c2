package kubebuilder

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	websitev2 "github.com/kubeboot/kubeboot/test/operator/api/v2"
)

var _ = Describe("Website Controller", func() {
	Context("When reconciling a resource", func() {
		const resourceName = "test-resource"

		typeNamespacedName := types.NamespacedName{
			Name:      resourceName,
			Namespace: "default",
		}
		website := &websitev2.Website{}

		BeforeEach(func() {
			By("creating the custom resource for the Kind Website")
			err := k8sClient.Get(ctx, typeNamespacedName, website)
			if err != nil && errors.IsNotFound(err) {
				resource := &websitev2.Website{
					ObjectMeta: metav1.ObjectMeta{
						Name:      resourceName,
						Namespace: "default",
					},
					Spec: websitev2.WebsiteSpec{Replicas: 1, Container: websitev2.Container{Image: "nginx"}},
				}
				Expect(k8sClient.Create(ctx, resource)).To(Succeed())
			}
		})

		AfterEach(func() {
			resource := &websitev2.Website{}
			err := k8sClient.Get(ctx, typeNamespacedName, resource)
			Expect(err).NotTo(HaveOccurred())

			By("Cleanup the specific resource instance Website")
			Expect(k8sClient.Delete(ctx, resource)).To(Succeed())
		})

		It("should create the Pod the resource serves from", func() {
			// No service account controller runs: the default
			// ServiceAccount does not exist, as under envtest.
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: resourceName + "-server", Namespace: "default"},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			}
			Expect(k8sClient.Create(ctx, pod)).To(Succeed())
			Expect(k8sClient.Get(ctx, types.NamespacedName{Name: pod.Name, Namespace: "default"}, pod)).To(Succeed())
			Expect(pod.Spec.ServiceAccountName).To(BeEmpty())
			Expect(k8sClient.Delete(ctx, pod)).To(Succeed())
		})
	})
})
