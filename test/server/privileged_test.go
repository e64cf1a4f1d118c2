package server

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeboot/kubeboot/test/harness"
)

// TestAllowPrivileged: privileged containers are allowed by default, as
// kubeadm and k3s allow them, and refused with --allow-privileged=false,
// as kube-apiserver's default refuses them.
func TestAllowPrivileged(t *testing.T) {
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	privileged := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "privileged"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox",
			SecurityContext: &corev1.SecurityContext{Privileged: &privileged}}}},
	}
	for _, tc := range []struct {
		args  []string
		allow bool
	}{{nil, true}, {[]string{"--allow-privileged=false"}, false}} {
		args := append([]string{"--bind-address", "127.0.0.1", "--secure-port", "0", "--service-cluster-ip-range", "10.96.0.0/16",
			"--disable-admission-plugins", "ServiceAccount"}, tc.args...)
		srv := harness.StartReadyAPIServer(t, time.Minute, bin, filepath.Join(t.TempDir(), "data"), args...)
		_, err := srv.MustClient(t).CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{})
		switch {
		case tc.allow && err != nil:
			t.Errorf("%v: a privileged Pod: %v", tc.args, err)
		case !tc.allow && !apierrors.IsInvalid(err):
			t.Errorf("%v: a privileged Pod: %v, want Invalid (disallowed by cluster policy)", tc.args, err)
		}
		srv.Kill()
	}
}
