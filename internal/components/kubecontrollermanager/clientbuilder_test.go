package kubecontrollermanager

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/controller-manager/pkg/clientbuilder"
)

// failingBuilder answers Config with each of errs in turn, then succeeds.
type failingBuilder struct {
	clientbuilder.SimpleControllerClientBuilder
	errs  []error
	calls int
}

func (f *failingBuilder) Config(name string) (*rest.Config, error) {
	f.calls++
	if f.calls <= len(f.errs) {
		return nil, f.errs[f.calls-1]
	}
	return f.SimpleControllerClientBuilder.Config(name)
}

func TestRetryingClientBuilder(t *testing.T) {
	leaderChanged := apierrors.NewInternalError(errors.New("etcdserver: leader changed"))
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts"}, "node-controller", errors.New("no"))
	for _, tc := range []struct {
		name      string
		errs      []error
		wantErr   error
		wantCalls int
	}{
		{"succeeds at once", nil, nil, 1},
		{"transient errors retried", []error{leaderChanged, apierrors.NewTooManyRequests("busy", 1), apierrors.NewServerTimeout(schema.GroupResource{Resource: "serviceaccounts"}, "get", 1)}, nil, 4},
		{"a lasting transient error fails with it", []error{leaderChanged, leaderChanged, leaderChanged, leaderChanged}, leaderChanged, 3},
		{"a permanent error fails at once", []error{forbidden}, forbidden, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := &failingBuilder{SimpleControllerClientBuilder: clientbuilder.SimpleControllerClientBuilder{ClientConfig: &rest.Config{Host: "http://127.0.0.1:1"}}, errs: tc.errs}
			b := retryingClientBuilder{builder: inner, ctx: context.Background(), backoff: wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 3}}
			if len(tc.errs) > 0 && tc.wantErr == nil {
				b.backoff.Steps = len(tc.errs) + 1
			}
			cfg, err := b.Config("node-controller")
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Config: error %v, want %v", err, tc.wantErr)
			}
			if err == nil && cfg == nil {
				t.Fatal("Config: no error and no configuration")
			}
			if inner.calls != tc.wantCalls {
				t.Errorf("%d calls, want %d", inner.calls, tc.wantCalls)
			}
		})
	}
}

// A stopping controller manager tries once, as upstream's builder, and
// does not wait out the backoff.
func TestRetryingClientBuilderStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	inner := &failingBuilder{SimpleControllerClientBuilder: clientbuilder.SimpleControllerClientBuilder{ClientConfig: &rest.Config{Host: "http://127.0.0.1:1"}},
		errs: []error{apierrors.NewInternalError(errors.New("etcdserver: leader changed"))}}
	b := retryingClientBuilder{builder: inner, ctx: ctx, backoff: wait.Backoff{Duration: time.Hour, Factor: 1, Steps: 2}}
	if _, err := b.Config("node-controller"); err == nil {
		t.Fatal("Config succeeded though its only try failed")
	}
	if inner.calls != 1 {
		t.Errorf("%d calls after the context was done, want 1", inner.calls)
	}
	// Once is enough when the API answers.
	inner.calls, inner.errs = 0, nil
	if _, err := b.Config("node-controller"); err != nil || inner.calls != 1 {
		t.Errorf("Config after the context was done: %v after %d calls, want a configuration after 1", err, inner.calls)
	}
}
