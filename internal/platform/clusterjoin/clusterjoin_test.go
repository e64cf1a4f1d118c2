package clusterjoin

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubeboot/kubeboot/internal/platform/nodesettings"
)

func TestParseToken(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	tok, err := NewToken(ca)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ParseToken(" " + tok.String() + "\n"); err != nil || got != tok {
		t.Errorf("ParseToken(String()) = %+v, %v; want %+v", got, err, tok)
	}
	hash := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		in   string
		want Token
	}{
		{"K10" + hash + "::server:p", Token{CAHash: hash, User: ServerUser, Password: "p"}},
		{"K10" + strings.ToUpper(hash) + "::node:p:q", Token{CAHash: hash, User: AgentUser, Password: "p:q"}},
		{"K10" + hash + "::abcdef.0123456789abcdef", Token{CAHash: hash, Password: "abcdef.0123456789abcdef"}},
	} {
		if got, err := ParseToken(tc.in); err != nil || got != tc.want || got.String() != strings.Replace(tc.in, strings.ToUpper(hash), hash, 1) {
			t.Errorf("ParseToken(%q) = %+v, %v; want %+v, written back the same", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "secret", "K10" + hash, "K10" + hash[:10] + "::server:p", "K10" + hash + "::admin:p",
		"K10" + hash + "::server:", "X10" + hash + "::server:p", "K10" + hash + "::ABCDEF.0123456789abcdef", "abcdef.0123456789abcdef"} {
		if _, err := ParseToken(bad); err == nil {
			t.Errorf("ParseToken(%q) accepted", bad)
		}
	}
	if _, err := ParseToken("secret"); !errors.Is(err, ErrNoCAHash) {
		t.Errorf("a password alone: %v, want ErrNoCAHash", err)
	}
}

func TestParseUserToken(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	other := strings.Repeat("cd", 32)
	for _, tc := range []struct {
		in, user, hash string
		want           Token
		err            string
	}{
		{in: "a-long-enough-password", user: AgentUser, hash: hash, want: Token{CAHash: hash, User: AgentUser, Password: "a-long-enough-password"}},
		{in: "a-long-enough-password", user: AgentUser, want: Token{User: AgentUser, Password: "a-long-enough-password"}},
		{in: "K10" + hash + "::node:a-long-enough-password", user: AgentUser, hash: hash, want: Token{CAHash: hash, User: AgentUser, Password: "a-long-enough-password"}},
		{in: "short", user: AgentUser, err: "shorter than 16"},
		{in: "a password with spaces", user: ServerUser, err: "a space"},
		{in: "K10" + hash + "::server:a-long-enough-password", user: AgentUser, err: "is not node:<password>"},
		{in: "K10" + other + "::node:a-long-enough-password", user: AgentUser, hash: hash, err: "is not this cluster's"},
		{in: "K10" + hash + "::abcdef.0123456789abcdef", user: ServerUser, err: "is not server:<password>"},
	} {
		got, err := ParseUserToken(tc.in, tc.user, tc.hash)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseUserToken(%q, %s) = %+v, %v; want an error saying %q", tc.in, tc.user, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseUserToken(%q, %s) = %+v, %v; want %+v", tc.in, tc.user, got, err, tc.want)
		}
	}
}

// fakeMembers is a membership whose learners catch up after notYet
// promotions.
type fakeMembers struct {
	mu      sync.Mutex
	notYet  int
	added   []string
	removed []uint64
}

func (f *fakeMembers) AddLearner(_ context.Context, name, peerURL string) (Member, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.added = append(f.added, name)
	return Member{ID: 42, InitialCluster: "first=https://198.51.100.1:2380," + name + "=" + peerURL}, nil
}

func (f *fakeMembers) Promote(context.Context, uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.notYet > 0 {
		f.notYet--
		return fmt.Errorf("%w: learner behind", ErrNotYet)
	}
	return nil
}

func (f *fakeMembers) Remove(_ context.Context, id uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, id)
	return nil
}

// TestJoin runs the client against the endpoints: the CA is pinned by the
// token's hash, the files come with the right password only, a learner
// is added and promoted once caught up.
func TestJoin(t *testing.T) {
	dir := t.TempDir()
	members := &fakeMembers{notYet: 2}
	s := &Server{DataDir: dir, TokenFile: filepath.Join(dir, "token"), CAFile: filepath.Join(dir, "pki", "ca.crt"),
		Files: []string{"pki/ca.crt", "pki/ca.key", "absent"}, Members: members}
	srv := httptest.NewTLSServer(s.Wrap(nil))
	defer srv.Close()
	ca := []byte("the CA's PEM")
	if err := WriteFiles(dir, map[string][]byte{"pki/ca.crt": ca, "pki/ca.key": []byte("the CA's key")}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	token, err := EnsureToken(s.TokenFile, ca)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := EnsureToken(s.TokenFile, []byte("another CA")); err != nil || again != token {
		t.Errorf("EnsureToken replaced the token: %v, %v", again, err)
	}
	// The test server's certificate is httptest's own, so the client's
	// pinned CA would refuse it: the hash check is what is tested here,
	// then the endpoints through a client trusting httptest's CA.
	other := token
	other.CAHash = CAHash([]byte("another cluster's CA"))
	if _, err := Dial(ctx, srv.URL, other); err == nil || !strings.Contains(err.Error(), "is not the token's") {
		t.Errorf("Dial with another cluster's hash: %v", err)
	}
	c := &Client{server: srv.URL, token: token, http: srv.Client()}
	files, err := c.FetchFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || string(files["pki/ca.key"]) != "the CA's key" {
		t.Errorf("files: %v", files)
	}
	wrong := &Client{server: srv.URL, token: Token{CAHash: token.CAHash, Password: "wrong"}, http: srv.Client()}
	if _, err := wrong.FetchFiles(ctx); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("a wrong password fetched the files: %v", err)
	}
	if _, err := wrong.AddLearner(ctx, "intruder", "https://198.51.100.9:2380"); err == nil {
		t.Error("a wrong password added a member")
	}
	m, err := c.AddLearner(ctx, "second", "https://198.51.100.2:2380")
	if err != nil || m.ID != 42 || !strings.Contains(m.InitialCluster, "second=https://198.51.100.2:2380") {
		t.Errorf("AddLearner: %+v, %v", m, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.Promote(pctx, m.ID); err != nil || members.notYet != 0 {
		t.Errorf("Promote: %v (not caught up %d more times)", err, members.notYet)
	}
	if err := c.RemoveMember(ctx, m.ID); err != nil || len(members.removed) != 1 {
		t.Errorf("RemoveMember: %v, removed %v", err, members.removed)
	}
	if len(members.added) != 1 {
		t.Errorf("members added: %v, want only second", members.added)
	}

	// A server whose etcd takes no members takes no servers; one without
	// agent admission, no agents.
	s.Members = nil
	if _, err := c.FetchFiles(ctx); err == nil || !strings.Contains(err.Error(), "--cluster-init") {
		t.Errorf("a server that takes no servers sent its files: %v", err)
	}
	if _, err := c.JoinAgent(ctx, "n1", "password"); err == nil || !strings.Contains(err.Error(), "takes no agents") {
		t.Errorf("a server that takes no agents admitted one: %v", err)
	}

	// Without a token file the server takes no joins.
	if err := os.Remove(s.TokenFile); err != nil {
		t.Fatal(err)
	}
	if _, err := c.FetchFiles(ctx); err == nil || !strings.Contains(err.Error(), "no token") {
		t.Errorf("a server without a token answered: %v", err)
	}
}

// fakeAgents admits node n1 once the server can (after notYet refusals)
// and refuses any other name; of bootstrap tokens, it takes
// abcdef.0123456789abcdef, after as many refusals as notYet.
type fakeAgents struct{ notYet int }

func (f *fakeAgents) Authenticate(_ context.Context, token string) error {
	if f.notYet > 0 {
		f.notYet--
		return fmt.Errorf("%w: the apiserver is starting", ErrNotYet)
	}
	if token != "abcdef.0123456789abcdef" {
		return errors.New("unknown")
	}
	return nil
}

func (f *fakeAgents) Admit(_ context.Context, nodeName, password string) (AgentCredentials, error) {
	if f.notYet > 0 {
		f.notYet--
		return AgentCredentials{}, fmt.Errorf("%w: the apiserver is starting", ErrNotYet)
	}
	if nodeName != "n1" || password != "pw" {
		return AgentCredentials{}, errors.New("the node name is taken")
	}
	return AgentCredentials{BootstrapToken: "abcdef.0123456789abcdef", ProxyCert: []byte("cert"), ProxyKey: []byte("key"),
		Settings: clusterSettings}, nil
}

// clusterSettings are what fakeAgents hands its agents.
var clusterSettings = nodesettings.Settings{ClusterDomain: "cluster.local", ClusterDNS: nodesettings.Addrs{netip.MustParseAddr("10.96.0.10")},
	PodNetwork: nodesettings.PodNetwork{ClusterCIDR: "10.42.0.0/16", Backend: nodesettings.VXLAN}, LocalStorage: true, NetworkPolicy: true}

// TestJoinAgent: an agent is admitted with the token's password, asks
// again while the server cannot answer yet, and hears why it is refused.
func TestJoinAgent(t *testing.T) {
	dir := t.TempDir()
	s := &Server{DataDir: dir, TokenFile: filepath.Join(dir, "token"), Agents: &fakeAgents{notYet: 2}}
	srv := httptest.NewTLSServer(s.Wrap(nil))
	defer srv.Close()
	token, err := EnsureToken(s.TokenFile, []byte("the CA's PEM"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wrong := &Client{server: srv.URL, token: Token{CAHash: token.CAHash, Password: "wrong"}, http: srv.Client()}
	if _, err := wrong.JoinAgent(ctx, "n1", "pw"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("a wrong token joined an agent: %v", err)
	}
	c := &Client{server: srv.URL, token: token, http: srv.Client()}
	creds, err := c.JoinAgent(ctx, "n1", "pw")
	if err != nil || creds.BootstrapToken != "abcdef.0123456789abcdef" || string(creds.ProxyKey) != "key" || !reflect.DeepEqual(creds.Settings, clusterSettings) {
		t.Errorf("JoinAgent = %+v, %v", creds, err)
	}
	if _, err := c.JoinAgent(ctx, "n2", "pw"); err == nil || !strings.Contains(err.Error(), "the node name is taken") {
		t.Errorf("JoinAgent of a taken name: %v", err)
	}
}

// TestTokenRoles: the server token joins servers and agents; the agent
// token (or the server token's password as the agent's user) and a
// bootstrap token the agents' authenticator takes join agents only; the
// rest nothing.
func TestTokenRoles(t *testing.T) {
	dir := t.TempDir()
	s := &Server{DataDir: dir, TokenFile: filepath.Join(dir, "token"), AgentTokenFile: filepath.Join(dir, "agent-token"),
		Files: []string{"token"}, Members: &fakeMembers{}, Agents: &fakeAgents{}}
	srv := httptest.NewTLSServer(s.Wrap(nil))
	defer srv.Close()
	server, err := EnsureToken(s.TokenFile, []byte("the CA's PEM"))
	if err != nil {
		t.Fatal(err)
	}
	agent := Token{CAHash: server.CAHash, User: AgentUser, Password: "the-agents-password"}
	if err := WriteToken(s.AgentTokenFile, agent); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name                string
		token               Token
		servers, agents     bool
		serverErr, agentErr string
	}{
		{name: "the server token", token: server, servers: true, agents: true},
		{name: "the agent token", token: agent, agents: true, serverErr: "403"},
		{name: "the server password as the agent's user", token: Token{CAHash: server.CAHash, User: AgentUser, Password: server.Password}, agents: true, serverErr: "403"},
		{name: "the agent password as the server's user", token: Token{CAHash: server.CAHash, User: ServerUser, Password: agent.Password}, serverErr: "401", agentErr: "401"},
		{name: "a bootstrap token", token: Token{CAHash: server.CAHash, Password: "abcdef.0123456789abcdef"}, agents: true, serverErr: "403"},
		{name: "an unknown bootstrap token", token: Token{CAHash: server.CAHash, Password: "zzzzzz.0123456789abcdef"}, serverErr: "401", agentErr: "does not join this cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Client{server: srv.URL, token: tc.token, http: srv.Client()}
			_, err := c.FetchFiles(ctx)
			if tc.servers != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.serverErr) {
				t.Errorf("fetching the servers' files: %v; want allowed %v", err, tc.servers)
			}
			_, err = c.JoinAgent(ctx, "n1", "pw")
			if tc.agents != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.agentErr) {
				t.Errorf("joining an agent: %v; want allowed %v", err, tc.agents)
			}
		})
	}
	// A bootstrap token that cannot be checked yet is asked about again.
	s.Agents = &fakeAgents{notYet: 2}
	c := &Client{server: srv.URL, token: Token{CAHash: server.CAHash, Password: "abcdef.0123456789abcdef"}, http: srv.Client()}
	if _, err := c.JoinAgent(ctx, "n1", "pw"); err != nil {
		t.Errorf("a bootstrap token checked once the server can: %v", err)
	}
}
