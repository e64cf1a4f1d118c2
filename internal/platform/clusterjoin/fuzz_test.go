package clusterjoin

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseToken: any text either parses to a token that prints as text
// that parses back to it, or is refused; none panics.
func FuzzParseToken(f *testing.F) {
	hash := strings.Repeat("ab", 32)
	for _, s := range []string{
		"K10" + hash + "::server:a-long-enough-password",
		"K10" + hash + "::node:secret",
		"K10" + hash + "::abcdef.0123456789abcdef",
		"K10" + strings.ToUpper(hash) + "::server:x",
		"K10" + hash + "::server:",
		"K10" + hash[:10] + "::server:x",
		"secret", "", " \n", "::", "K10::", "K10" + hash + "::other:x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		token, err := ParseToken(s)
		if err != nil {
			return
		}
		back, err := ParseToken(token.String())
		if err != nil || back != token {
			t.Errorf("ParseToken(%q) = %+v, which prints as %q, parsed back as %+v, %v", s, token, token.String(), back, err)
		}
		if _, err := ParseUserToken(s, ServerUser, token.CAHash); err == nil && token.User != ServerUser && strings.HasPrefix(strings.TrimSpace(s), tokenPrefix) {
			t.Errorf("ParseUserToken(%q, server) took a token of user %q", s, token.User)
		}
	})
}

// FuzzJoinEndpoints sends fuzzed requests (method, path, credentials and
// body) to the join endpoints: every answer is an HTTP status below 500
// (the fakes behind them never fail), and none panics; a request without
// the token's password is never let past authentication.
func FuzzJoinEndpoints(f *testing.F) {
	dir := f.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "pki"), 0o700); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pki", "ca.crt"), []byte("a CA"), 0o600); err != nil {
		f.Fatal(err)
	}
	token, err := EnsureToken(filepath.Join(dir, "token"), []byte("a CA"))
	if err != nil {
		f.Fatal(err)
	}
	s := &Server{DataDir: dir, TokenFile: filepath.Join(dir, "token"), AgentTokenFile: filepath.Join(dir, "agent-token"),
		CAFile: filepath.Join(dir, "pki", "ca.crt"), Files: []string{"pki/ca.crt"}, Members: &fakeMembers{}, Agents: &fakeAgents{}}
	for _, seed := range []struct {
		method          uint8
		path, user, pwd string
		bearer          string
		body            []byte
	}{
		{0, caCertsPath, "", "", "", nil},
		{0, bootstrapPath, ServerUser, token.Password, "", nil},
		{1, membersPath, ServerUser, token.Password, "", []byte(`{"name":"m","peerURL":"https://198.51.100.2:2380"}`)},
		{1, membersPath, ServerUser, token.Password, "", []byte(`{"name":`)},
		{1, membersPath + "/42" + promoteSubpath, ServerUser, token.Password, "", nil},
		{2, membersPath + "/x", ServerUser, token.Password, "", nil},
		{1, agentPath, AgentUser, token.Password, "", []byte(`{"nodeName":"n","password":"p"}`)},
		{1, agentPath, "", "", "abcdef.0123456789abcdef", []byte(`{"nodeName":"n"}`)},
		{1, agentPath, "", "", "abcdef.0123456789abcdee", []byte(`{}`)},
		{0, bootstrapPath, ServerUser, "wrong", "", nil},
		{0, apiPrefix + "../../etc/passwd", ServerUser, token.Password, "", nil},
	} {
		f.Add(seed.method, seed.path, seed.user, seed.pwd, seed.bearer, seed.body)
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	handler := s.Wrap(next)
	methods := []string{http.MethodGet, http.MethodPost, http.MethodDelete, http.MethodPut}
	f.Fuzz(func(t *testing.T, method uint8, path, user, password, bearer string, body []byte) {
		r := httptest.NewRequest(methods[int(method)%len(methods)], "https://server/", bytes.NewReader(body))
		r.URL.Path = path
		if user != "" || password != "" {
			r.SetBasicAuth(user, password)
		}
		if bearer != "" {
			r.Header.Set("Authorization", "Bearer "+bearer)
		}
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("%s %q: HTTP %d: %s", r.Method, path, w.Code, w.Body)
		}
		authorized := password == token.Password || bearer == "abcdef.0123456789abcdef"
		if strings.HasPrefix(path, apiPrefix) && !authorized && w.Code < 300 {
			t.Fatalf("%s %q without the token: HTTP %d: %s", r.Method, path, w.Code, w.Body)
		}
	})
}
