package election

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	componentbaseconfig "k8s.io/component-base/config"
)

// slowLeases serves one namespace's Leases as an apiserver does, its
// updates answered only after delay (a loaded server's writes).
type slowLeases struct {
	delay   time.Duration
	mu      sync.Mutex
	lease   *coordinationv1.Lease
	version int
	// renewed counts the updates answered.
	renewed atomic.Int32
}

func (s *slowLeases) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPut {
		select {
		case <-time.After(s.delay):
		case <-r.Context().Done():
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.Method {
	case http.MethodGet:
		if s.lease == nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound})
			return
		}
	case http.MethodPost, http.MethodPut:
		var l coordinationv1.Lease
		if err := json.NewDecoder(r.Body).Decode(&l); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.version++
		l.ResourceVersion = strconv.Itoa(s.version)
		s.lease = &l
		if r.Method == http.MethodPut {
			s.renewed.Add(1)
		}
	default:
		http.Error(w, "unexpected "+r.Method, http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodPost {
		w.WriteHeader(http.StatusCreated)
	}
	_ = json.NewEncoder(w).Encode(s.lease)
}

// TestRunKeepsLeaseWhileWritesAreSlow checks that a component keeps its
// lease while its apiserver answers every renewal in more than half the
// renew deadline but within it: client-go's own lock gives a request half
// (at least 1 s), and this elector lost the lease at its first renewal.
func TestRunKeepsLeaseWhileWritesAreSlow(t *testing.T) {
	leases := &slowLeases{delay: 1500 * time.Millisecond}
	srv := httptest.NewServer(leases)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := Config{
		Name: "test",
		Election: componentbaseconfig.LeaderElectionConfiguration{
			LeaderElect:       true,
			LeaseDuration:     metav1.Duration{Duration: 3 * time.Second},
			RenewDeadline:     metav1.Duration{Duration: 2 * time.Second},
			RetryPeriod:       metav1.Duration{Duration: 200 * time.Millisecond},
			ResourceLock:      "leases",
			ResourceName:      "test",
			ResourceNamespace: "kube-system",
		},
		Identity: "me",
		Client:   &rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}},
	}
	var lost atomic.Bool
	led, err := Run(ctx, c, func(lead context.Context) {
		<-lead.Done()
		lost.Store(ctx.Err() == nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !led {
		t.Fatal("the lease was never held")
	}
	if lost.Load() {
		t.Errorf("the lease was lost after %d renewals, each answered in %v of the %v renew deadline",
			leases.renewed.Load(), leases.delay, c.Election.RenewDeadline.Duration)
	}
	// Renewals every 1.5 s and a retry period for 5 s, and the release.
	if n := leases.renewed.Load(); n < 3 {
		t.Errorf("%d renewals answered, want at least 3", n)
	}
}
