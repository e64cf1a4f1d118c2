package controlplane

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeboot/kubeboot/internal/platform/cpulabels"
)

// componentStopTimeout bounds how long the in-process components may take
// to stop before the apiserver drains anyway: kube-controller-manager's
// --controller-shutdown-timeout default.
const componentStopTimeout = 10 * time.Second

// completedComponent is a component and what it needs.
type completedComponent struct {
	Component
	needs Needs
}

// inProcessUsers are the users cc's components act as.
func (cc *completedConfig) inProcessUsers() []string {
	var users []string
	for _, c := range cc.components {
		if c.needs.User != "" {
			users = append(users, c.needs.User)
		}
	}
	return users
}

// anyComponent reports whether one of cc's components needs what need
// says.
func (cc *completedConfig) anyComponent(need func(Needs) bool) bool {
	for _, c := range cc.components {
		if need(c.needs) {
			return true
		}
	}
	return false
}

// egress is the one component's Needs.Egress, if any.
func (cc *completedConfig) egress() (utilnet.DialFunc, error) {
	var egress utilnet.DialFunc
	var by string
	for _, c := range cc.components {
		if c.needs.Egress == nil {
			continue
		}
		if egress != nil {
			return nil, fmt.Errorf("components %s and %s both route the server's connections to the cluster", by, c.Name())
		}
		egress, by = c.needs.Egress, c.Name()
	}
	return egress, nil
}

// wrapEndpoints serves the components' Needs.Endpoints in front of next.
func (cc *completedConfig) wrapEndpoints(next http.Handler) http.Handler {
	endpoints := map[string]http.Handler{}
	for _, c := range cc.components {
		maps.Copy(endpoints, c.needs.Endpoints)
	}
	if len(endpoints) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, ok := endpoints[r.URL.Path]; ok {
			h.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// grant runs a component's grant with a client of the apiserver's own
// (loopback) configuration, retrying while the server settles.
func grant(ctx context.Context, loopback *rest.Config, grant func(context.Context, kubernetes.Interface) error) error {
	client, err := kubernetes.NewForConfig(loopback)
	if err != nil {
		return err
	}
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, authorizedTimeout, true, func(ctx context.Context) (bool, error) {
		last = grant(ctx, client)
		return last == nil, nil
	}); err != nil {
		return fmt.Errorf("%w (last: %v)", err, last)
	}
	return nil
}

// waitAuthorized waits until the server allows client the request attrs
// describes. /readyz is 200 once the RBAC bootstrap policy is stored; the
// authorizer sees it through an informer a moment later, and a component
// that starts in between fails on its first request (its binary would
// exit and be restarted).
func waitAuthorized(ctx context.Context, client *rest.Config, attrs authorizationv1.ResourceAttributes) error {
	c, err := kubernetes.NewForConfig(client)
	if err != nil {
		return err
	}
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, authorizedTimeout, true, func(ctx context.Context) (bool, error) {
		r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = r.Status.Reason
		return r.Status.Allowed, nil
	})
	if err != nil {
		return fmt.Errorf("not allowed to %s %s within %s: %s", attrs.Verb, attrs.Resource, authorizedTimeout, last)
	}
	return nil
}

// authorizedTimeout bounds waitAuthorized.
const authorizedTimeout = time.Minute

// runComponents runs the in-process components until ctx is done and
// returns once they have all stopped. A component that cannot start, or
// stops on its own (kube-controller-manager on a lost lease), sends its
// error to failed: the server then stops, as that component's binary
// would exit.
func (s *Server) runComponents(ctx context.Context, failed chan<- error) {
	fail := func(c Component, err error) {
		select {
		case failed <- fmt.Errorf("%s: %w", c.Name(), err):
		default:
		}
	}
	var wg sync.WaitGroup
	for _, c := range s.cfg.components {
		var state componentState
		if c.needs.Status != "" {
			state.set(errNotStarted)
			s.api.SetComponentStatus(c.needs.Status, state.get)
		}
		wg.Go(func() {
			cpulabels.Do(ctx, c.Name(), func(ctx context.Context) {
				if err := s.authorize(ctx, c.needs); err != nil {
					if ctx.Err() == nil {
						fail(c, err)
					}
					return
				}
				state.set(nil)
				err := c.Run(ctx, s)
				if err != nil && ctx.Err() == nil {
					fail(c, err)
				}
				if err == nil {
					err = errStopped
				} else {
					err = fmt.Errorf("%w: %w", errStopped, err)
				}
				state.set(err)
			})
		})
	}
	wg.Wait()
}

// authorize gives a component's user its rights and waits until the
// server allows it what it needs first.
func (s *Server) authorize(ctx context.Context, needs Needs) error {
	if needs.User == "" {
		return nil
	}
	if needs.Grant != nil {
		if err := grant(ctx, s.api.Loopback, needs.Grant); err != nil {
			return fmt.Errorf("%s: %w", needs.User, err)
		}
	}
	client, err := s.ClientConfig(needs.User)
	if err != nil {
		return err
	}
	if err := waitAuthorized(ctx, client, needs.Allowed); err != nil {
		return fmt.Errorf("%s: %w", needs.User, err)
	}
	return nil
}

var (
	errNotStarted = errors.New("not started yet")
	errStopped    = errors.New("stopped")
)

// componentState is an in-process component's health as
// componentstatuses reports it: nil while it runs.
type componentState struct {
	mu  sync.Mutex
	err error
}

func (c *componentState) set(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
}

func (c *componentState) get() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
