package presence

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

func TestWait(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	for _, tc := range []struct {
		name    string
		exists  bool // the object exists before Wait
		created bool // it is created while Wait waits
		want    error
	}{
		{name: "one exists", exists: true},
		{name: "one appears", created: true},
		{name: "none comes", want: context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset()
			if tc.exists {
				if _, err := c.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			lw := &cache.ListWatch{
				ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					return c.CoreV1().Nodes().List(ctx, o)
				},
				WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
					return c.CoreV1().Nodes().Watch(ctx, o)
				},
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if tc.created {
				time.AfterFunc(200*time.Millisecond, func() {
					_, _ = c.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{})
				})
			}
			if err := Wait(ctx, lw); !errors.Is(err, tc.want) {
				t.Errorf("Wait = %v, want %v", err, tc.want)
			}
		})
	}
}
