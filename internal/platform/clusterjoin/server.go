package clusterjoin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	"k8s.io/klog/v2"

	"github.com/kubeboot/kubeboot/internal/platform/nodesettings"
)

// The endpoints, k3s's paths where it has them.
const (
	caCertsPath    = "/cacerts"
	apiPrefix      = "/v1-kubeboot/"
	bootstrapPath  = apiPrefix + "server-bootstrap"
	membersPath    = apiPrefix + "etcd-members"
	agentPath      = apiPrefix + "agent"
	promoteSubpath = "/promote"
)

// Member is an etcd member a joining server was added as.
type Member struct {
	// ID is the member's etcd ID.
	ID uint64 `json:"id,string"`
	// InitialCluster is etcd's --initial-cluster for it: every member's
	// name and peer URL, its own included.
	InitialCluster string `json:"initialCluster"`
}

// Members is the etcd membership the endpoints change.
type Members interface {
	// AddLearner adds a learner member with peerURL, to be named name.
	AddLearner(ctx context.Context, name, peerURL string) (Member, error)
	// Promote makes learner id a voting member.
	Promote(ctx context.Context, id uint64) error
	// Remove removes member id.
	Remove(ctx context.Context, id uint64) error
}

// Agents admits agents, the nodes that join with a token.
type Agents interface {
	// Authenticate checks a bootstrap token (id.secret) an agent joins
	// with: nil if it may join, ErrNotYet (wrapped) if that cannot be
	// told yet, another error saying why not.
	Authenticate(ctx context.Context, bootstrapToken string) error
	// Admit admits the node named nodeName, whose host holds password
	// (nodejoin's node password), and returns what it joins with.
	Admit(ctx context.Context, nodeName, password string) (AgentCredentials, error)
}

// AgentCredentials are what an agent's node joins with.
type AgentCredentials struct {
	// BootstrapToken is the kubelet's, for its TLS bootstrap: it may ask
	// for the node's client certificate and nothing else.
	BootstrapToken string `json:"bootstrapToken"`
	// ProxyCert and ProxyKey are kube-proxy's client certificate and key
	// (PEM), which the cluster CA signed for system:kube-proxy.
	ProxyCert []byte `json:"proxyCert"`
	ProxyKey  []byte `json:"proxyKey"`
	// Settings are what every node of the cluster runs with: the
	// kubelet's clusterDNS and clusterDomain, the pod network, local
	// storage, the registry mirror and NetworkPolicy enforcement (their
	// keys inline).
	nodesettings.Settings
	// AgentCert and AgentKey are the client certificate and key of the
	// node's agent (nodejoin.AgentUser): its pod network and local
	// storage act with them.
	AgentCert []byte `json:"agentCert"`
	AgentKey  []byte `json:"agentKey"`
}

// ErrNotYet is a change of the membership the cluster cannot make yet,
// but will: a learner not caught up with the leader, or a member added
// moments ago that every member has not heard from since. Members return
// it wrapped; the joining server retries.
var ErrNotYet = errors.New("not yet")

// Server answers joins. Its fields are read at every request, so a
// server answers as soon as its files exist.
type Server struct {
	// DataDir holds the files.
	DataDir string
	// TokenFile is the server token, which joins servers and agents;
	// without it the server answers no join.
	TokenFile string
	// AgentTokenFile is the agent token (--agent-token), which joins
	// agents only; absent when there is none.
	AgentTokenFile string
	// CAFile is the cluster CA's PEM, which /cacerts serves to anyone.
	CAFile string
	// Files are the paths, relative to DataDir, that a joining server
	// fetches; those missing are left out.
	Files []string
	// Members is the etcd membership; nil when the server takes no
	// other servers (its etcd is not embedded, or not clustered).
	Members Members
	// Agents admits agents; nil when the server takes none.
	Agents Agents
}

// Wrap serves the join endpoints in front of next, before any
// authentication: /cacerts to anyone, the rest to the token's holder.
func (s *Server) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == caCertsPath && r.Method == http.MethodGet:
			s.serveCACerts(w)
		case strings.HasPrefix(r.URL.Path, apiPrefix):
			s.serveAPI(w, r)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func (s *Server) serveCACerts(w http.ResponseWriter) {
	data, err := os.ReadFile(s.CAFile)
	if err != nil {
		http.Error(w, "the cluster CA is not there yet", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/x-pem-file")
	_, _ = w.Write(data)
}

// role is what a join's credentials let it do.
type role int

const (
	// joinsAgents may join agents only.
	joinsAgents role = iota + 1
	// joinsServers may join servers and agents.
	joinsServers
)

// authError is a join refused for its credentials.
type authError struct {
	code int
	msg  string
}

func (e *authError) Error() string { return e.msg }

// authenticate tells what the request's credentials let it do: a token's
// user and password in basic authentication, or a bootstrap token as the
// bearer token (k3s's schemes).
func (s *Server) authenticate(r *http.Request) (role, error) {
	server, err := ReadToken(s.TokenFile)
	if errors.Is(err, os.ErrNotExist) {
		return 0, &authError{http.StatusNotFound, "this server takes no joins: it has no token"}
	} else if err != nil {
		klog.FromContext(r.Context()).Error(err, "Reading the join token")
		return 0, &authError{http.StatusInternalServerError, "the server's token file is unreadable"}
	}
	refused := &authError{http.StatusUnauthorized, "the token is not this cluster's"}
	if user, password, ok := r.BasicAuth(); ok {
		switch {
		case user == ServerUser && samePassword(password, server):
			return joinsServers, nil
		case user == AgentUser && samePassword(password, server):
			// An agent may join with the server token's password under
			// the agent's user, as with k3s.
			return joinsAgents, nil
		case user == AgentUser:
			agent, err := ReadToken(s.AgentTokenFile)
			if err == nil && samePassword(password, agent) {
				return joinsAgents, nil
			}
		}
		return 0, refused
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || !bootstraputil.IsValidBootstrapToken(token) {
		return 0, refused
	}
	if s.Agents == nil {
		return 0, &authError{http.StatusNotFound, noAgents}
	}
	if err := s.Agents.Authenticate(r.Context(), token); errors.Is(err, ErrNotYet) {
		return 0, err
	} else if err != nil {
		return 0, &authError{http.StatusUnauthorized, "the bootstrap token does not join this cluster: " + err.Error()}
	}
	return joinsAgents, nil
}

// samePassword is whether password is t's, in constant time.
func samePassword(password string, t Token) bool {
	return subtle.ConstantTimeCompare([]byte(password), []byte(t.Password)) == 1
}

// noAgents is the answer of a server that admits no agents.
const noAgents = "this server takes no agents: agents join a kubeboot server with bootstrap token authentication (--enable-bootstrap-token-auth)"

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	role, err := s.authenticate(r)
	var ae *authError
	switch {
	case errors.As(err, &ae):
		http.Error(w, ae.msg, ae.code)
		return
	case err != nil:
		writeError(w, err)
		return
	}
	path := r.URL.Path
	switch {
	case path == agentPath && r.Method == http.MethodPost:
		s.serveAgent(w, r)
	case role != joinsServers:
		http.Error(w, "the token joins agents only: servers join with the server token (token in a server's data dir)", http.StatusForbidden)
	case s.Members == nil && (path == bootstrapPath || strings.HasPrefix(path, membersPath)):
		http.Error(w, "this server takes no other servers: servers join a cluster whose first server started with --cluster-init on embedded etcd", http.StatusNotFound)
	case path == bootstrapPath && r.Method == http.MethodGet:
		s.serveBootstrap(w)
	case path == membersPath && r.Method == http.MethodPost:
		var req struct{ Name, PeerURL string }
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil || req.Name == "" || req.PeerURL == "" {
			http.Error(w, "want a JSON object with name and peerURL", http.StatusBadRequest)
			return
		}
		m, err := s.Members.AddLearner(r.Context(), req.Name, req.PeerURL)
		if err != nil {
			writeError(w, fmt.Errorf("adding an etcd member: %w", err))
			return
		}
		klog.FromContext(r.Context()).Info("A server joins: etcd learner added", "name", req.Name, "peerURL", req.PeerURL, "id", strconv.FormatUint(m.ID, 16))
		writeJSON(w, m)
	case strings.HasPrefix(path, membersPath+"/"):
		idText, promote := strings.CutSuffix(strings.TrimPrefix(path, membersPath+"/"), promoteSubpath)
		id, err := strconv.ParseUint(idText, 10, 64)
		if err != nil {
			http.Error(w, fmt.Sprintf("%q is not a member ID", idText), http.StatusBadRequest)
			return
		}
		switch {
		case promote && r.Method == http.MethodPost:
			err = s.Members.Promote(r.Context(), id)
		case !promote && r.Method == http.MethodDelete:
			err = s.Members.Remove(r.Context(), id)
		default:
			http.Error(w, "unknown request", http.StatusNotFound)
			return
		}
		if err != nil {
			writeError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, "unknown request", http.StatusNotFound)
	}
}

func (s *Server) serveAgent(w http.ResponseWriter, r *http.Request) {
	if s.Agents == nil {
		http.Error(w, noAgents, http.StatusNotFound)
		return
	}
	var req agentRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil || req.NodeName == "" || req.Password == "" {
		http.Error(w, "want a JSON object with nodeName and password", http.StatusBadRequest)
		return
	}
	creds, err := s.Agents.Admit(r.Context(), req.NodeName, req.Password)
	if err != nil {
		writeError(w, err)
		return
	}
	klog.FromContext(r.Context()).Info("An agent joins", "node", req.NodeName, "from", r.RemoteAddr)
	writeJSON(w, creds)
}

// agentRequest is an agent's join.
type agentRequest struct {
	NodeName string `json:"nodeName"`
	Password string `json:"password"`
}

// bootstrap is what a joining server fetches: the shared files' contents
// by path relative to the data dir.
type bootstrap struct {
	Files map[string][]byte `json:"files"`
}

func (s *Server) serveBootstrap(w http.ResponseWriter) {
	b := bootstrap{Files: map[string][]byte{}}
	for _, f := range s.Files {
		data, err := os.ReadFile(filepath.Join(s.DataDir, f))
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			http.Error(w, "reading "+f+": "+err.Error(), http.StatusInternalServerError)
			return
		}
		b.Files[f] = data
	}
	writeJSON(w, b)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers err: 503 with Retry-After for ErrNotYet, else 409.
func writeError(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrNotYet) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	http.Error(w, err.Error(), http.StatusConflict)
}
