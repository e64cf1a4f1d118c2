package clusterjoin

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// requestTimeout bounds each request to the server.
const requestTimeout = 10 * time.Second

// Client is a joining server's connection to a server of the cluster,
// which it has verified against the token's CA hash.
type Client struct {
	server string
	token  Token
	http   *http.Client
	// CA is the cluster CA's PEM, as the token pins it.
	CA []byte
}

// Dial fetches the server's CA from /cacerts and checks it against the
// token's hash; only then does it trust the server, and send it the
// password in later requests.
func Dial(ctx context.Context, server string, token Token) (*Client, error) {
	u, err := url.Parse(server)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("--server %q is not an https URL of a server (https://<address>:6443)", server)
	}
	server = strings.TrimSuffix(u.String(), "/")
	// The CA is not known yet: its hash, checked below, is the trust.
	insecure := &http.Client{Timeout: requestTimeout, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer insecure.CloseIdleConnections()
	ca, err := get(ctx, insecure, server+caCertsPath, nil)
	if err != nil {
		return nil, fmt.Errorf("--server %s: fetching its CA: %w", server, err)
	}
	if got := CAHash(ca); got != token.CAHash {
		return nil, fmt.Errorf("--server %s: its CA's hash %s is not the token's %s: the token is another cluster's, or something stands between", server, got, token.CAHash)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("--server %s: its CA is not a PEM certificate", server)
	}
	pinned := &http.Client{Timeout: requestTimeout, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	return &Client{server: server, token: token, http: pinned, CA: ca}, nil
}

// Close releases the client's connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// FetchFiles returns the files a server of the cluster shares, by path
// relative to the data dir.
func (c *Client) FetchFiles(ctx context.Context) (map[string][]byte, error) {
	body, err := get(ctx, c.http, c.server+bootstrapPath, &c.token)
	if err != nil {
		return nil, fmt.Errorf("--server %s: fetching the cluster's files: %w", c.server, err)
	}
	var b bootstrap
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("--server %s: the cluster's files: %w", c.server, err)
	}
	for path := range b.Files {
		if !filepath.IsLocal(path) {
			return nil, fmt.Errorf("--server %s: it sent a file outside the data dir: %q", c.server, path)
		}
	}
	return b.Files, nil
}

// JoinAgent asks the server to admit this host as node nodeName, whose
// node password is password, again while the server cannot yet, until
// ctx ends.
func (c *Client) JoinAgent(ctx context.Context, nodeName, password string) (AgentCredentials, error) {
	req, _ := json.Marshal(agentRequest{NodeName: nodeName, Password: password})
	body, err := c.retry(ctx, http.MethodPost, agentPath, req)
	if err != nil {
		return AgentCredentials{}, fmt.Errorf("--server %s: joining as node %s: %w", c.server, nodeName, err)
	}
	var creds AgentCredentials
	if err := json.Unmarshal(body, &creds); err != nil {
		return AgentCredentials{}, fmt.Errorf("--server %s: joining as node %s: %w", c.server, nodeName, err)
	}
	return creds, nil
}

// AddLearner asks the server to add this server's etcd member, named
// name, at peerURL, as a learner, again while the cluster is not ready
// for it, until ctx ends.
func (c *Client) AddLearner(ctx context.Context, name, peerURL string) (Member, error) {
	req, _ := json.Marshal(map[string]string{"name": name, "peerURL": peerURL})
	body, err := c.retry(ctx, http.MethodPost, membersPath, req)
	if err != nil {
		return Member{}, fmt.Errorf("--server %s: joining etcd: %w", c.server, err)
	}
	var m Member
	if err := json.Unmarshal(body, &m); err != nil {
		return Member{}, fmt.Errorf("--server %s: joining etcd: %w", c.server, err)
	}
	return m, nil
}

// Promote asks the server to promote learner id, again while it has not
// caught up, until ctx ends.
func (c *Client) Promote(ctx context.Context, id uint64) error {
	path := membersPath + "/" + strconv.FormatUint(id, 10) + promoteSubpath
	if _, err := c.retry(ctx, http.MethodPost, path, nil); err != nil {
		return fmt.Errorf("--server %s: promoting etcd member %x: %w", c.server, id, err)
	}
	return nil
}

// retry sends a request until it succeeds, fails other than with 503
// (ErrNotYet), or ctx ends.
func (c *Client) retry(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	for {
		resp, err := c.do(ctx, method, path, body)
		var se *statusError
		if err == nil || !errors.As(err, &se) || se.code != http.StatusServiceUnavailable {
			return resp, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (the server said: %s)", ctx.Err(), se.msg)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// RemoveMember asks the server to remove etcd member id.
func (c *Client) RemoveMember(ctx context.Context, id uint64) error {
	_, err := c.do(ctx, http.MethodDelete, membersPath+"/"+strconv.FormatUint(id, 10), nil)
	return err
}

func (c *Client) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.server+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	c.token.authorize(req)
	return send(c.http, req)
}

// statusError is a response other than 2xx.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.code, http.StatusText(e.code), e.msg)
}

// get gets url, with token's credentials unless it is nil.
func get(ctx context.Context, client *http.Client, url string, token *Token) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if token != nil {
		token.authorize(req)
	}
	return send(client, req)
}

// authorize sets the token's credentials on req: its user and password
// in basic authentication, a bootstrap token as the bearer token.
func (t Token) authorize(req *http.Request) {
	if t.IsBootstrap() {
		req.Header.Set("Authorization", "Bearer "+t.Password)
		return
	}
	req.SetBasicAuth(t.User, t.Password)
}

func send(client *http.Client, req *http.Request) ([]byte, error) {
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, &statusError{code: resp.StatusCode, msg: strings.TrimSpace(string(body))}
	}
	return body, nil
}

// WriteFiles writes files (as FetchFiles returns them) under dataDir,
// 0600 in 0700 directories.
func WriteFiles(dataDir string, files map[string][]byte) error {
	for path, data := range files {
		full := filepath.Join(dataDir, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(full, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
