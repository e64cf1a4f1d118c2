package kubeboottest

import (
	"context"
	"os"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestRunMain checks what Main does around a package's tests: a ready
// server for run, run's result as the exit code, and the server stopped
// and its temporary data dir removed afterwards.
func TestRunMain(t *testing.T) {
	for _, want := range []int{0, 3} {
		var srv *Server
		code := runMain(Options{}, func(s *Server) int {
			srv = s
			client := kubernetes.NewForConfigOrDie(s.Config)
			if _, err := client.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{}); err != nil {
				t.Errorf("the server run was given: %v", err)
			}
			return want
		})
		if code != want {
			t.Errorf("runMain = %d, want run's %d", code, want)
		}
		if srv == nil {
			t.Fatal("run was not called")
		}
		if _, err := os.Stat(srv.DataDir); !os.IsNotExist(err) {
			t.Errorf("data dir %s after runMain: %v, want it removed", srv.DataDir, err)
		}
		client := kubernetes.NewForConfigOrDie(srv.Config)
		if _, err := client.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{}); err == nil {
			t.Error("the server still answers after runMain")
		}
	}
}
