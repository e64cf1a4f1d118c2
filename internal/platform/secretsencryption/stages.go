package secretsencryption

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kubeboot/kubeboot/internal/platform/clusterjoin"
)

// The stages of the cycle, as k3s's secrets-encrypt status names them.
// prepare adds a new key that only reads; rotate makes it the writing key;
// reencrypt rewrites every Secret with it and drops the other keys.
// enable and disable change whether Secrets are written encrypted and ask
// for a reencrypt. rotate-keys runs prepare, rotate and reencrypt.
const (
	StageStart             = "start"
	StagePrepare           = "prepare"
	StageRotate            = "rotate"
	StageReencryptRequest  = "reencrypt_request"
	StageReencryptActive   = "reencrypt_active"
	StageReencryptFinished = "reencrypt_finished"
)

// Cluster runs the cycle on a running cluster, from one of its servers.
// Each stage writes the record, which every running server takes without
// a restart, and waits until every running server has loaded it; a stage
// begins only when every running server has loaded the one before, so
// that no server ever reads a Secret stored with a key it lacks. A server
// that is down takes the record at its next start.
type Cluster struct {
	// Client reaches the server, Etcd its etcd; Prefix is its
	// --etcd-prefix.
	Client kubernetes.Interface
	Etcd   *clientv3.Client
	Prefix string
	// Path is the server's configuration file, TokenFile its server
	// token's.
	Path, TokenFile string
	// Wait bounds how long a stage waits for the running servers.
	Wait time.Duration
	// Progress, if set, is told how many Secrets a reencrypt has done.
	Progress func(done, total int)
}

// Changed is what a stage did.
type Changed struct {
	// Stage is the stage the cluster is at now.
	Stage string
	// Down are the servers that were down: they take it at their start.
	Down []string
	// Writer is the key that writes now.
	Writer Key
	// hash is the recorded configuration's.
	hash string
}

// ErrNoRecord is a cluster whose servers have not made the record: no
// server runs with --secrets-encryption, or none has been ready yet. (A
// type, not errors.New: no package init for every process to run.)
var ErrNoRecord error = noRecordError{}

type noRecordError struct{}

func (noRecordError) Error() string {
	return "the cluster has no record of its encryption configuration (ConfigMap kube-system/" + RecordName + "): is the server running, with --secrets-encryption?"
}

// read reads the record and its configuration.
func (c Cluster) read(ctx context.Context) (*record, Config, error) {
	r, err := getRecord(ctx, c.Client)
	if err != nil {
		return nil, nil, err
	}
	if r == nil {
		return nil, nil, ErrNoRecord
	}
	data, err := r.open(c.TokenFile)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, nil, fmt.Errorf("the cluster's encryption configuration: %w", err)
	}
	return r, cfg, nil
}

// stageChange is one stage: the stages it may follow, the stage it
// leads to, and how it changes the configuration.
type stageChange struct {
	command string
	from    []string
	to      string
	edit    func(*record, Config) (Config, error)
}

// change runs one stage: unless force, the cluster must be at one of
// s.from with every running server on the record's configuration; the
// edited configuration is recorded at s.to, and change waits until every
// running server has loaded it.
func (c Cluster) change(ctx context.Context, s stageChange, force bool) (Changed, error) {
	var changed Changed
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r, cfg, err := c.read(ctx)
		if err != nil {
			return err
		}
		if !force && !slices.Contains(s.from, r.stage()) {
			return fmt.Errorf("%s: the cluster is at the stage %s; %s follows %s (--force skips this check)", s.command, r.stage(), s.command, strings.Join(s.from, " or "))
		}
		up, down, err := c.servers(ctx, r)
		if err != nil {
			return fmt.Errorf("%s: %w", s.command, err)
		}
		if behind := r.behind(up); !force && len(behind) > 0 {
			return fmt.Errorf("%s: the servers %s have not loaded the stage %s yet; every running server must before the next stage (secrets-encrypt status shows them; --force skips this check)",
				s.command, strings.Join(behind, ", "), r.stage())
		}
		next, err := s.edit(r, cfg)
		if err != nil {
			return fmt.Errorf("%s: %w", s.command, err)
		}
		data, err := next.Marshal()
		if err != nil {
			return err
		}
		token, err := clusterjoin.ReadToken(c.TokenFile)
		if err != nil {
			return err
		}
		if err := r.setConfig(token.Password, data, s.to); err != nil {
			return err
		}
		// The resource version refuses a stage run meanwhile elsewhere:
		// the loop reads again and checks again.
		if _, err := c.Client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Update(ctx, r.ConfigMap, metav1.UpdateOptions{}); err != nil {
			return err
		}
		changed = Changed{Stage: s.to, Down: down, Writer: next.Writer(), hash: r.hash()}
		return nil
	})
	if err != nil {
		return Changed{}, err
	}
	return changed, c.waitServers(ctx, s.command, changed.hash)
}

// behind are the servers of up that have not recorded the record's
// configuration as loaded.
func (r record) behind(up []string) []string {
	states := r.servers()
	var out []string
	for _, name := range up {
		if states[name].Hash != r.hash() {
			out = append(out, name)
		}
	}
	return out
}

// waitServers waits until every running server has loaded the
// configuration of hash.
func (c Cluster) waitServers(ctx context.Context, command, hash string) error {
	var behind []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, c.Wait, true, func(ctx context.Context) (bool, error) {
		r, err := getRecord(ctx, c.Client)
		if err != nil || r == nil {
			return false, err
		}
		if r.hash() != hash {
			return false, fmt.Errorf("%s: the cluster's encryption configuration was changed again meanwhile", command)
		}
		up, _, err := c.servers(ctx, r)
		if err != nil {
			return false, nil
		}
		behind = r.behind(up)
		return len(behind) == 0, nil
	})
	if err != nil && len(behind) > 0 {
		return fmt.Errorf("%s: recorded, but the servers %s did not load it within %s (their logs say why; secrets-encrypt status shows them): %w", command, strings.Join(behind, ", "), c.Wait, err)
	}
	return err
}

// servers are the servers the record has states of, by name: those
// running (their address is among the kubernetes Service's endpoints,
// which a server leaves within seconds of stopping) and those down.
// Without the endpoints (--endpoint-reconciler-type=none) every server
// counts as running.
func (c Cluster) servers(ctx context.Context, r *record) (up, down []string, err error) {
	list, err := c.Client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).List(ctx,
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
	if err != nil {
		return nil, nil, fmt.Errorf("the kubernetes Service's endpoints: %w", err)
	}
	published := map[string]bool{}
	for _, slice := range list.Items {
		for _, e := range slice.Endpoints {
			for _, a := range e.Addresses {
				published[a] = true
			}
		}
	}
	for name, st := range r.servers() {
		if len(published) == 0 || published[st.Address] {
			up = append(up, name)
		} else {
			down = append(down, name)
		}
	}
	sort.Strings(up)
	sort.Strings(down)
	return up, down, nil
}

// provider is the --secrets-encryption-provider of the running servers,
// which new keys take: they must agree.
func (c Cluster) provider(ctx context.Context, r *record) (string, error) {
	up, _, err := c.servers(ctx, r)
	if err != nil {
		return "", err
	}
	states := r.servers()
	provider := ""
	for _, name := range up {
		p := states[name].Provider
		if provider != "" && p != provider {
			return "", fmt.Errorf("the servers disagree on --secrets-encryption-provider (%s has %s, another %s): start them with one", name, p, provider)
		}
		provider = p
	}
	if provider == "" {
		return AESCBC, nil
	}
	return provider, nil
}

// Prepare adds a new key that only reads, on every server.
func (c Cluster) Prepare(ctx context.Context, force bool, now time.Time) (Changed, error) {
	return c.change(ctx, c.prepare(ctx, now), force)
}

func (c Cluster) prepare(ctx context.Context, now time.Time) stageChange {
	return stageChange{command: "prepare", from: []string{StageStart, StageReencryptFinished}, to: StagePrepare,
		edit: func(r *record, cfg Config) (Config, error) {
			if !cfg.Enabled() {
				return nil, errors.New("Secrets are not encrypted (secrets-encrypt disable): enable encryption first")
			}
			provider, err := c.provider(ctx, r)
			if err != nil {
				return nil, err
			}
			key, err := newKey(provider, cfg, now)
			if err != nil {
				return nil, err
			}
			// Before identity, which reads what was stored unencrypted.
			at := len(cfg)
			if cfg[at-1].Provider == Identity {
				at--
			}
			return slices.Insert(slices.Clone(cfg), at, key), nil
		}}
}

// Rotate makes the prepared key the one that writes, on every server.
func (c Cluster) Rotate(ctx context.Context, force bool) (Changed, error) {
	return c.change(ctx, rotateStage, force)
}

var rotateStage = stageChange{command: "rotate", from: []string{StagePrepare}, to: StageRotate,
	edit: func(_ *record, cfg Config) (Config, error) {
		// The prepared key is the last of those that are not identity.
		for i := len(cfg) - 1; i > 0; i-- {
			if cfg[i].Provider != Identity {
				return toFront(cfg, i), nil
			}
		}
		return nil, errors.New("no prepared key: run prepare first")
	}}

// toFront is cfg with its key at i first.
func toFront(cfg Config, i int) Config {
	return append(Config{cfg[i]}, slices.Delete(slices.Clone(cfg), i, i+1)...)
}

// Reencrypted is what a reencrypt did.
type Reencrypted struct {
	Changed
	// Secrets is how many Secrets were read, Took how long their
	// rewriting took (without the waits for the servers).
	Secrets int
	Took    time.Duration
}

// Reencrypt rewrites every Secret with the writing key, then, unless
// keep, drops every other key but identity on every server.
func (c Cluster) Reencrypt(ctx context.Context, force, keep bool) (Reencrypted, error) {
	// Marked active first: a reencrypt that stops half way is run again.
	active, err := c.change(ctx, stageChange{command: "reencrypt", from: []string{StageRotate, StageReencryptRequest, StageReencryptActive},
		to: StageReencryptActive, edit: func(_ *record, cfg Config) (Config, error) { return cfg, nil }}, force)
	if err != nil {
		return Reencrypted{}, err
	}
	// The file this server loaded is the record's (change waited for
	// it): the rewriting uses the keys the servers use.
	if current, err := os.ReadFile(c.Path); err != nil || contentHash(current) != active.hash {
		return Reencrypted{}, fmt.Errorf("reencrypt: %s is not the cluster's configuration: is this server running?", c.Path)
	}
	start := time.Now()
	n, err := reencrypt(ctx, c.Etcd, c.Prefix, c.Path, c.Progress)
	if err != nil {
		return Reencrypted{}, fmt.Errorf("reencrypt: %w", err)
	}
	done := Reencrypted{Secrets: n, Took: time.Since(start)}
	done.Changed, err = c.change(ctx, stageChange{command: "reencrypt", from: []string{StageReencryptActive}, to: StageReencryptFinished,
		edit: func(_ *record, cfg Config) (Config, error) {
			if keep {
				return cfg, nil
			}
			return cfg.writerOnly(), nil
		}}, false)
	return done, err
}

// writerOnly is the writing key and identity, which reads what was stored
// unencrypted.
func (c Config) writerOnly() Config {
	out := Config{c.Writer()}
	if c.Enabled() && slices.ContainsFunc(c, func(k Key) bool { return k.Provider == Identity }) {
		out = append(out, Key{Provider: Identity})
	}
	return out
}

// Enable writes Secrets encrypted again, with the newest key kept or a new
// one; a reencrypt then encrypts those stored while disabled.
func (c Cluster) Enable(ctx context.Context, force bool, now time.Time) (Changed, error) {
	return c.change(ctx, stageChange{command: "enable", from: []string{StageStart, StageReencryptFinished, StageReencryptRequest}, to: StageReencryptRequest,
		edit: func(r *record, cfg Config) (Config, error) {
			if cfg.Enabled() {
				return nil, fmt.Errorf("Secrets are encrypted already, with %s", cfg.Writer())
			}
			if i := slices.IndexFunc(cfg, func(k Key) bool { return k.Provider != Identity }); i >= 0 {
				return toFront(cfg, i), nil
			}
			provider, err := c.provider(ctx, r)
			if err != nil {
				return nil, err
			}
			key, err := newKey(provider, cfg, now)
			if err != nil {
				return nil, err
			}
			return append(Config{key}, cfg...), nil
		}}, force)
}

// Disable writes Secrets unencrypted, still reading those encrypted; a
// reencrypt then decrypts them.
func (c Cluster) Disable(ctx context.Context, force bool) (Changed, error) {
	return c.change(ctx, stageChange{command: "disable", from: []string{StageStart, StageReencryptFinished, StageReencryptRequest}, to: StageReencryptRequest,
		edit: func(_ *record, cfg Config) (Config, error) {
			if !cfg.Enabled() {
				return nil, errors.New("Secrets are not encrypted already")
			}
			if i := slices.IndexFunc(cfg, func(k Key) bool { return k.Provider == Identity }); i >= 0 {
				return toFront(cfg, i), nil
			}
			return append(Config{{Provider: Identity}}, cfg...), nil
		}}, force)
}

// RotateKeys runs prepare, rotate and reencrypt; the new key is
// Changed.Writer.
func (c Cluster) RotateKeys(ctx context.Context, force bool, now time.Time) (Reencrypted, error) {
	if _, err := c.Prepare(ctx, force, now); err != nil {
		return Reencrypted{}, fmt.Errorf("rotate-keys: %w", err)
	}
	if _, err := c.Rotate(ctx, false); err != nil {
		return Reencrypted{}, fmt.Errorf("rotate-keys: %w", err)
	}
	done, err := c.Reencrypt(ctx, false, false)
	if err != nil {
		return done, fmt.Errorf("rotate-keys: %w", err)
	}
	return done, nil
}

// Status is the cluster's encryption as status shows it.
type Status struct {
	// Stage is the cycle's stage; Config the keys.
	Stage  string
	Config Config
	// Servers are the servers' states; Up those running, Behind those of
	// them that have not loaded the configuration, Down those not
	// running.
	Servers  map[string]ServerState
	Up, Down []string
	Behind   []string
	// Secrets counts the Secrets by the key that stored them.
	Secrets map[string]int
	// NoRecord says that the cluster has no record yet: Config is the
	// server's file.
	NoRecord bool
}

// ReadStatus reads the record (or, before the cluster has one, the
// server's file), the servers' states and the Secrets' keys.
func (c Cluster) ReadStatus(ctx context.Context) (Status, error) {
	var st Status
	r, cfg, err := c.read(ctx)
	switch {
	case errors.Is(err, ErrNoRecord):
		st.NoRecord, st.Stage = true, StageStart
		if st.Config, err = ReadConfig(c.Path); err != nil {
			return Status{}, err
		}
	case err != nil:
		return Status{}, err
	default:
		st.Stage, st.Config, st.Servers = r.stage(), cfg, r.servers()
	}
	if r != nil {
		if st.Up, st.Down, err = c.servers(ctx, r); err != nil {
			return Status{}, err
		}
		st.Behind = r.behind(st.Up)
	}
	if st.Secrets, err = CountSecrets(ctx, c.Etcd, c.Prefix); err != nil {
		return Status{}, err
	}
	return st, nil
}
