// Package clusterjoin is how a server joins a cluster of kubeboot servers
// (k3s's --cluster-init, --server and --token): the join token, the
// endpoints a server answers joins on, and the client a joining server
// uses.
//
// The token is k3s's secure format, K10<hash>::server:<password>: the hash
// is the SHA-256 of the cluster CA's PEM, which a joining server checks
// against what /cacerts serves before it trusts the server or sends the
// password; the password then authenticates it for the files a second
// control plane must share (the CAs and their keys, the service account
// signing key, the encryption configuration) and for its etcd membership.
package clusterjoin

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// tokenPrefix begins k3s's secure tokens ("K10" and the CA hash).
const tokenPrefix = "K10"

// serverUser is the token's user, k3s's name for a server join.
const serverUser = "server"

// Token is a join token.
type Token struct {
	// CAHash is the hex SHA-256 of the cluster CA's PEM.
	CAHash string
	// Password authenticates the joining server.
	Password string
}

// NewToken returns a token for the CA caPEM with a new random password.
func NewToken(caPEM []byte) (Token, error) {
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return Token{}, err
	}
	return Token{CAHash: CAHash(caPEM), Password: hex.EncodeToString(secret)}, nil
}

// CAHash is the hash a token pins of caPEM.
func CAHash(caPEM []byte) string {
	sum := sha256.Sum256(caPEM)
	return hex.EncodeToString(sum[:])
}

// String is the token as a user passes it: K10<hash>::server:<password>.
func (t Token) String() string {
	return tokenPrefix + t.CAHash + "::" + serverUser + ":" + t.Password
}

// ErrNoCAHash is a token without the CA hash (k3s's short form), which
// kubeboot refuses: the joining server could not tell whom it sends the
// password to.
var ErrNoCAHash = errors.New("the token has no CA hash (K10<hash>::server:<password>): use the whole token from the token file in the first server's data dir")

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
	user, password, ok := strings.Cut(creds, ":")
	if !ok || user != serverUser || password == "" {
		return Token{}, fmt.Errorf("the token's credentials %q are not server:<password>", creds)
	}
	return Token{CAHash: strings.ToLower(hash), Password: password}, nil
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
	return t, os.WriteFile(path, []byte(t.String()+"\n"), 0o600)
}

// TokenArg is the token a command was given: --token, or the contents of
// --token-file, which exclude each other; "" if neither.
func TokenArg(token, tokenFile string) (string, error) {
	if tokenFile == "" {
		return token, nil
	}
	if token != "" {
		return "", errors.New("--token and --token-file exclude each other")
	}
	data, err := os.ReadFile(tokenFile)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}
