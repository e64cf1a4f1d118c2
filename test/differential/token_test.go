package differential

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPodBoundTokenClaims asks both servers for the tokens a kubelet asks
// for (a pod-bound TokenRequest for 3607 s, its projected volume's
// default) and for a plain one-hour token, and compares the claims: with
// --service-account-extend-token-expiration=false (kubeboot's default,
// the CIS benchmark's item 1.2.30; the peer is given it), every token is
// issued as requested, with no warnafter claim.
func TestPodBoundTokenClaims(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts kube-apiserver")
	}
	startServers(t)
	const ns = "/api/v1/namespaces/tokens"
	setup := []request{
		{method: "POST", path: "/api/v1/namespaces", body: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"tokens"}}`},
		{method: "POST", path: ns + "/serviceaccounts", body: `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"default"}}`},
		{method: "POST", path: ns + "/pods", body: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`},
	}
	for _, s := range []server{kubeboot, peer} {
		for _, r := range setup {
			if a := s.do(t, r); a.code != http.StatusCreated {
				t.Fatalf("%s: %s %s: %d\n%s", s.name, r.method, r.path, a.code, a.body)
			}
		}
	}
	for _, tc := range []struct {
		name    string
		seconds int
		bound   bool
		// want are the lifetime (exp - iat) and warnafter - iat, 0 for none.
		wantLifetime, wantWarnAfter time.Duration
	}{
		{"the kubelet's pod-bound 3607 s token", 3607, true, 3607 * time.Second, 0},
		{"a pod-bound one-hour token", 3600, true, time.Hour, 0},
		{"an unbound 3607 s token", 3607, false, 3607 * time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want map[string]any
			for _, s := range []server{peer, kubeboot} {
				_, claims := requestToken(t, s, ns, tc.seconds, tc.bound)
				iat := claimTime(t, claims, "iat")
				if got := claimTime(t, claims, "exp").Sub(iat); got != tc.wantLifetime {
					t.Errorf("%s: token lives %s, want %s", s.name, got, tc.wantLifetime)
				}
				var warnAfter time.Duration
				if k, ok := claims["kubernetes.io"].(map[string]any); ok && k["warnafter"] != nil {
					warnAfter = time.Unix(int64(k["warnafter"].(float64)), 0).Sub(iat)
				}
				if warnAfter != tc.wantWarnAfter {
					t.Errorf("%s: warnafter %s after issue, want %s", s.name, warnAfter, tc.wantWarnAfter)
				}
				shape := claimShape(claims)
				if want == nil {
					want = shape
				} else if got, w := fmt.Sprint(shape), fmt.Sprint(want); got != w {
					t.Errorf("claims differ:\nkube-apiserver: %s\nkubeboot:       %s", w, got)
				}
			}
		})
	}
	t.Run("a pod-bound token is refused once its Pod is deleted", func(t *testing.T) {
		for _, s := range []server{peer, kubeboot} {
			token, _ := requestToken(t, s, ns, 3607, true)
			if !authenticated(t, s, token) {
				t.Errorf("%s: the token of a running Pod is refused", s.name)
			}
			if a := s.do(t, request{method: "DELETE", path: ns + "/pods/web"}); a.code != http.StatusOK {
				t.Fatalf("%s: delete pod: %d\n%s", s.name, a.code, a.body)
			}
			// Both servers cache a successful token authentication for
			// 10 s (kube-apiserver's TokenSuccessCacheTTL); it must end
			// then.
			deadline := time.Now().Add(15 * time.Second)
			for authenticated(t, s, token) {
				if time.Now().After(deadline) {
					t.Errorf("%s: the token of a deleted Pod still authenticates after 15 s", s.name)
					break
				}
				time.Sleep(500 * time.Millisecond)
			}
		}
	})
}

// authenticated reports whether s's TokenReview authenticates token.
func authenticated(t *testing.T, s server, token string) bool {
	t.Helper()
	a := s.do(t, request{method: "POST", path: "/apis/authentication.k8s.io/v1/tokenreviews",
		body: fmt.Sprintf(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":%q}}`, token)})
	if a.code != http.StatusCreated {
		t.Fatalf("%s: token review: %d\n%s", s.name, a.code, a.body)
	}
	var review struct {
		Status struct{ Authenticated bool } `json:"status"`
	}
	if err := json.Unmarshal([]byte(a.raw), &review); err != nil {
		t.Fatalf("%s: token review: %v", s.name, err)
	}
	return review.Status.Authenticated
}

// requestToken asks s for a token of the tokens/default service account,
// bound to Pod web when bound, and returns it and its claims.
func requestToken(t *testing.T, s server, ns string, seconds int, bound bool) (string, map[string]any) {
	t.Helper()
	ref := ""
	if bound {
		pod := s.do(t, request{method: "GET", path: ns + "/pods/web"})
		var p struct {
			Metadata struct{ UID string } `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(pod.raw), &p); err != nil {
			t.Fatalf("%s: pod: %v", s.name, err)
		}
		ref = fmt.Sprintf(`,"boundObjectRef":{"kind":"Pod","apiVersion":"v1","name":"web","uid":%q}`, p.Metadata.UID)
	}
	a := s.do(t, request{method: "POST", path: ns + "/serviceaccounts/default/token",
		body: fmt.Sprintf(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":%d%s}}`, seconds, ref)})
	if a.code != http.StatusCreated {
		t.Fatalf("%s: token request: %d\n%s", s.name, a.code, a.body)
	}
	var tr struct {
		Status struct{ Token string } `json:"status"`
	}
	if err := json.Unmarshal([]byte(a.raw), &tr); err != nil {
		t.Fatalf("%s: token request: %v", s.name, err)
	}
	parts := strings.Split(tr.Status.Token, ".")
	if len(parts) != 3 {
		t.Fatalf("%s: token %q is not a JWT", s.name, tr.Status.Token)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatalf("%s: token payload: %v", s.name, err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatalf("%s: token claims: %v", s.name, err)
	}
	return tr.Status.Token, claims
}

func claimTime(t *testing.T, claims map[string]any, name string) time.Time {
	t.Helper()
	v, ok := claims[name].(float64)
	if !ok {
		t.Fatalf("claim %q missing in %v", name, claims)
	}
	return time.Unix(int64(v), 0)
}

// claimShape is what two servers' tokens share: every claim's name, and
// the values that do not name a particular object or time.
func claimShape(claims map[string]any) map[string]any {
	shape := map[string]any{}
	for k, v := range claims {
		switch k {
		case "iat", "exp", "nbf", "jti":
			shape[k] = "TIME/ID"
		case "kubernetes.io":
			m := v.(map[string]any)
			keys := make([]string, 0, len(m))
			for key := range m {
				keys = append(keys, key)
			}
			slices.Sort(keys)
			shape[k] = keys
			shape["namespace"] = m["namespace"]
		default:
			shape[k] = v
		}
	}
	return shape
}
