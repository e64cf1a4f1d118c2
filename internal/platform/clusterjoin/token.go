// Package clusterjoin is how a server joins a cluster of kubeboot servers
// (k3s's --cluster-init, --server and --token): the join token, the
// endpoints a server answers joins on, and the client a joining server
// uses.
//
// The token is k3s's secure format, K10<hash>::<credentials>: the hash is
// the SHA-256 of the cluster CA's PEM, which a joining node checks against
// what /cacerts serves before it trusts the server or sends the
// credentials. The server token's (server:<password>) authenticate a
// server for the files a second control plane must share (the CAs and
// their keys, the service account signing key, the encryption
// configuration) and for its etcd membership, and agents; the agent
// token's (node:<password>) and a bootstrap token's (<id>.<secret>,
// checked by the API server's bootstrap token authenticator) authenticate
// agents only. The cluster's record of its tokens (Record) keeps every
// server's token files the same, through rotations.
package clusterjoin

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	bootstraputil "k8s.io/cluster-bootstrap/token/util"
)

// tokenPrefix begins k3s's secure tokens ("K10" and the CA hash).
const tokenPrefix = "K10"

// The users of a token's credentials, k3s's names.
const (
	// ServerUser's token, the server token, joins servers and agents.
	ServerUser = "server"
	// AgentUser's token, the agent token (--agent-token), joins agents
	// only.
	AgentUser = "node"
)

// MinPasswordLength is the shortest password a token given by hand
// (--agent-token, token rotate --new-token) may have: the server token
// opens the cluster's CA keys.
const MinPasswordLength = 16

// Token is a join token.
type Token struct {
	// CAHash is the hex SHA-256 of the cluster CA's PEM.
	CAHash string
	// User is ServerUser or AgentUser; empty for a bootstrap token
	// (kubeboot token create), whose id.secret is then Password.
	User string
	// Password authenticates the joining node.
	Password string
}

// NewToken returns a server token for the CA caPEM with a new random
// password.
func NewToken(caPEM []byte) (Token, error) {
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return Token{}, err
	}
	return Token{CAHash: CAHash(caPEM), User: ServerUser, Password: hex.EncodeToString(secret)}, nil
}

// CAHash is the hash a token pins of caPEM.
func CAHash(caPEM []byte) string {
	sum := sha256.Sum256(caPEM)
	return hex.EncodeToString(sum[:])
}

// String is the token as a user passes it: K10<hash>::<user>:<password>,
// or K10<hash>::<id>.<secret> for a bootstrap token.
func (t Token) String() string {
	if t.IsBootstrap() {
		return tokenPrefix + t.CAHash + "::" + t.Password
	}
	return tokenPrefix + t.CAHash + "::" + t.User + ":" + t.Password
}

// IsBootstrap is whether t is a bootstrap token, which joins agents only.
func (t Token) IsBootstrap() bool { return t.User == "" }

// ErrNoCAHash is a token without the CA hash (k3s's short form), which
// kubeboot refuses: the joining node could not tell whom it sends the
// password to.
var ErrNoCAHash = errors.New("the token has no CA hash (K10<hash>::<credentials>): use the whole token, from the token file in a server's data dir or kubeboot token create")

// ParseToken parses a token in the format String writes.
func ParseToken(s string) (Token, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Token{}, errors.New("the token is empty")
	}
	hash, creds, ok := strings.Cut(s, "::")
	if !ok || !strings.HasPrefix(hash, tokenPrefix) {
		return Token{}, ErrNoCAHash
	}
	hash = strings.TrimPrefix(hash, tokenPrefix)
	if b, err := hex.DecodeString(hash); err != nil || len(b) != sha256.Size {
		return Token{}, fmt.Errorf("the token's CA hash %q is not a hex SHA-256", hash)
	}
	hash = strings.ToLower(hash)
	if bootstraputil.IsValidBootstrapToken(creds) {
		return Token{CAHash: hash, Password: creds}, nil
	}
	user, password, ok := strings.Cut(creds, ":")
	if !ok || (user != ServerUser && user != AgentUser) || password == "" {
		return Token{}, fmt.Errorf("the token's credentials are not server:<password>, node:<password> or a bootstrap token <id>.<secret>")
	}
	return Token{CAHash: hash, User: user, Password: password}, nil
}

// ParseUserToken parses a token given by hand for user: a password alone
// (k3s's short form, of at least MinPasswordLength printable characters
// without spaces), or the whole token of that user. caHash, if set, is
// the cluster's: it completes a password alone and must be the whole
// token's.
func ParseUserToken(s, user, caHash string) (Token, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, tokenPrefix) && strings.Contains(s, "::") {
		t, err := ParseToken(s)
		switch {
		case err != nil:
			return Token{}, err
		case t.User != user:
			return Token{}, fmt.Errorf("the token is not %s:<password>", user)
		case caHash != "" && t.CAHash != caHash:
			return Token{}, fmt.Errorf("the token's CA hash %s is not this cluster's %s", t.CAHash, caHash)
		}
		return t, nil
	}
	if len(s) < MinPasswordLength {
		return Token{}, fmt.Errorf("the password is shorter than %d characters", MinPasswordLength)
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r > '~' }); i >= 0 {
		return Token{}, errors.New("the password has a space, or a character that is not printable ASCII")
	}
	return Token{CAHash: caHash, User: user, Password: s}, nil
}

// ReadToken reads and parses the token file at path.
func ReadToken(path string) (Token, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Token{}, err
	}
	t, err := ParseToken(string(data))
	if err != nil {
		return Token{}, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// EnsureToken returns the token in the file at path, or writes a new one
// for caPEM there (0600).
func EnsureToken(path string, caPEM []byte) (Token, error) {
	if t, err := ReadToken(path); err == nil || !errors.Is(err, os.ErrNotExist) {
		return t, err
	}
	t, err := NewToken(caPEM)
	if err != nil {
		return Token{}, err
	}
	return t, WriteToken(path, t)
}

// WriteToken writes t to the file at path (0600), replacing it whole: a
// reader sees the old token or the new one.
func WriteToken(path string, t Token) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(t.String() + "\n"); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// TokenArg is the token a command was given: --<flag>, or the contents of
// --<flag>-file, which exclude each other; "" if neither.
func TokenArg(flag, token, tokenFile string) (string, error) {
	if tokenFile == "" {
		return token, nil
	}
	if token != "" {
		return "", fmt.Errorf("--%s and --%s-file exclude each other", flag, flag)
	}
	data, err := os.ReadFile(tokenFile)
	if err != nil {
		return "", fmt.Errorf("--%s-file: %w", flag, err)
	}
	return strings.TrimSpace(string(data)), nil
}
