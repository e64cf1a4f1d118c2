package secretsencryption

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/server/options/encryptionconfig"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeboot/kubeboot/internal/platform/clusterjoin"
)

// TestConfigRoundTrip: a configuration of mixed providers is marshalled
// as runs of one provider, parses back to itself, and loads in upstream's
// encryption configuration loader.
func TestConfigRoundTrip(t *testing.T) {
	now := time.Unix(1, 0)
	a1, _ := newKey(AESCBC, nil, now)
	a2, _ := newKey(AESCBC, nil, now.Add(1))
	s1, _ := newKey(Secretbox, nil, now.Add(2))
	for _, cfg := range []Config{
		{a1, {Provider: Identity}},
		{s1, a1, a2, {Provider: Identity}},
		{{Provider: Identity}, a1, s1},
		{a1, s1, a2},
	} {
		data, err := cfg.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseConfig(data)
		if err != nil || !slices.Equal(back, cfg) {
			t.Errorf("%v: parsed back as %v, %v", cfg, back, err)
		}
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		_, err = encryptionconfig.LoadEncryptionConfig(ctx, path, true, "test")
		cancel()
		if err != nil {
			t.Errorf("%v: upstream does not load it: %v\n%s", cfg, err, data)
		}
	}
	if _, err := newKey("kms", nil, now); err == nil {
		t.Error("a key of an unknown provider was made")
	}
	for _, bad := range []string{
		"kind: EncryptionConfiguration\napiVersion: apiserver.config.k8s.io/v1\nresources:\n- resources: [configmaps]\n  providers: [{identity: {}}]\n",
		"kind: EncryptionConfiguration\napiVersion: apiserver.config.k8s.io/v1\nresources:\n- resources: [secrets]\n  providers: [{aesgcm: {keys: [{name: a, secret: c2VjcmV0c2VjcmV0c2VjcmV0MTI=}]}}]\n",
		"kind: EncryptionConfiguration\napiVersion: apiserver.config.k8s.io/v1\nresources:\n- resources: [secrets]\n  providers: []\n",
		"resources: [",
	} {
		if _, err := ParseConfig([]byte(bad)); err == nil {
			t.Errorf("ParseConfig(%q) took it", bad)
		}
	}
}

// TestSeal: a sealed value opens with its password only, and not once
// damaged.
func TestSeal(t *testing.T) {
	sealed, err := seal("the-password-of-a-token", []byte("keys"))
	if err != nil {
		t.Fatal(err)
	}
	if plain, err := unseal("the-password-of-a-token", sealed); err != nil || string(plain) != "keys" {
		t.Errorf("unseal: %q, %v", plain, err)
	}
	if _, err := unseal("another-password", sealed); err == nil {
		t.Error("opened with another password")
	}
	damaged := slices.Clone(sealed)
	damaged[len(damaged)-1] ^= 1
	for _, bad := range [][]byte{damaged, sealed[:10], nil, []byte("keys")} {
		if _, err := unseal("the-password-of-a-token", bad); err == nil {
			t.Errorf("opened %q", bad)
		}
	}
}

// TestKeyOf names the key that stored a value.
func TestKeyOf(t *testing.T) {
	for v, want := range map[string]string{
		"k8s:enc:aescbc:v1:aescbc-1:xyz":       "aescbc-1",
		"k8s:enc:secretbox:v1:secretbox-2:xyz": "secretbox-2",
		"k8s:enc:kms:v2:plugin:xyz":            "k8s:enc:kms:v2",
		"\x6b\x38\x73\x00protobuf":             Identity,
	} {
		if got := keyOf([]byte(v)); got != want {
			t.Errorf("keyOf(%q) = %q, want %q", v, got, want)
		}
	}
}

// cluster is a Cluster on a fake API with a record and a server state of
// each name given, running at the address given ("" for down), and a
// follower of each running server that loads whatever is recorded, but
// the server named stuck's.
func cluster(t *testing.T, provider map[string]string, addr map[string]string) (Cluster, kubernetes.Interface) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	token, err := clusterjoin.NewToken([]byte("ca"))
	if err != nil {
		t.Fatal(err)
	}
	if err := clusterjoin.WriteToken(tokenFile, token); err != nil {
		t.Fatal(err)
	}
	key, _ := newKey(AESCBC, nil, time.Unix(1, 0))
	data, _ := Config{key, {Provider: Identity}}.Marshal()
	r := record{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: RecordName, Namespace: metav1.NamespaceSystem}}}
	if err := r.setConfig(token.Password, data, StageStart); err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: metav1.NamespaceDefault,
		Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}}}
	for name, p := range provider {
		st, _ := json.Marshal(ServerState{Hash: r.hash(), Stage: StageStart, Provider: p, Address: addr[name]})
		r.Data[serverKeyPrefix+name] = string(st)
		if addr[name] != "" {
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr[name]}})
		}
	}
	client := fake.NewClientset(r.ConfigMap, slice)
	go func() {
		// The running servers' followers, which load what is recorded.
		for ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
			cm, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, RecordName, metav1.GetOptions{})
			if err != nil {
				continue
			}
			r := record{cm}
			for name, st := range r.servers() {
				if st.Address != "" && st.Hash != r.hash() && name != "stuck" {
					st.Hash, st.Stage = r.hash(), r.stage()
					data, _ := json.Marshal(st)
					r.Data[serverKeyPrefix+name] = string(data)
				}
			}
			_, _ = client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Update(ctx, r.ConfigMap, metav1.UpdateOptions{})
		}
	}()
	return Cluster{Client: client, TokenFile: tokenFile, Wait: 5 * time.Second}, client
}

// TestStages: the stages follow k3s's order, each changes the keys as its
// name says, a server that is down is not waited for, and servers that
// disagree on the provider get no new key.
func TestStages(t *testing.T) {
	ctx := context.Background()
	c, _ := cluster(t, map[string]string{"a": Secretbox, "b": Secretbox, "c": AESCBC},
		map[string]string{"a": "198.51.100.1", "b": "198.51.100.2", "c": ""})
	keys := func() Config {
		_, cfg, err := c.read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	first := keys()[0]
	if _, err := c.Rotate(ctx, false); err == nil || !strings.Contains(err.Error(), "rotate follows prepare") {
		t.Errorf("rotate at start: %v", err)
	}
	changed, err := c.Prepare(ctx, false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(changed.Down, []string{"c"}) || changed.Stage != StagePrepare {
		t.Errorf("prepare: %+v, want stage prepare with c down", changed)
	}
	prepared := keys()
	if len(prepared) != 3 || prepared[0] != first || prepared[1].Provider != Secretbox || prepared[2].Provider != Identity {
		t.Errorf("prepare: keys %v, want %s, a new secretbox key (the running servers' provider), identity", prepared, first)
	}
	if _, err := c.Prepare(ctx, false, time.Now()); err == nil {
		t.Error("prepare after prepare was taken")
	}
	if _, err := c.Disable(ctx, false); err == nil {
		t.Error("disable in the middle of a rotation was taken")
	}
	if _, err := c.Rotate(ctx, false); err != nil {
		t.Fatal(err)
	}
	if rotated := keys(); !slices.Equal(rotated, Config{prepared[1], first, {Provider: Identity}}) {
		t.Errorf("rotate: keys %v, want the prepared key first", rotated)
	}
	if got := (Config{prepared[1], first, {Provider: Identity}}).writerOnly(); !slices.Equal(got, Config{prepared[1], {Provider: Identity}}) {
		t.Errorf("writerOnly: %v", got)
	}
	if got := (Config{{Provider: Identity}, first}).writerOnly(); !slices.Equal(got, Config{{Provider: Identity}}) {
		t.Errorf("writerOnly, disabled: %v", got)
	}
}

// TestEnableDisable: disable writes with identity, enable with the key
// kept; each asks for a reencrypt; neither is taken twice.
func TestEnableDisable(t *testing.T) {
	ctx := context.Background()
	c, _ := cluster(t, map[string]string{"a": AESCBC}, map[string]string{"a": "198.51.100.1"})
	_, before, _ := c.read(ctx)
	if _, err := c.Enable(ctx, false, time.Now()); err == nil {
		t.Error("enable when enabled was taken")
	}
	changed, err := c.Disable(ctx, false)
	if err != nil || changed.Stage != StageReencryptRequest {
		t.Fatalf("disable: %+v, %v", changed, err)
	}
	if _, cfg, _ := c.read(ctx); cfg.Enabled() || !slices.Equal(cfg, Config{{Provider: Identity}, before[0]}) {
		t.Errorf("disable: keys %v", cfg)
	}
	if _, err := c.Disable(ctx, false); err == nil {
		t.Error("disable when disabled was taken")
	}
	if _, err := c.Enable(ctx, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, cfg, _ := c.read(ctx); !slices.Equal(cfg, before) {
		t.Errorf("enable: keys %v, want %v", cfg, before)
	}
}

// TestStageRefusals: servers that disagree on the provider get no new
// key; a running server that does not load a stage is named, and stops
// the next stage unless --force.
func TestStageRefusals(t *testing.T) {
	ctx := context.Background()
	c, _ := cluster(t, map[string]string{"a": AESCBC, "b": Secretbox}, map[string]string{"a": "198.51.100.1", "b": "198.51.100.2"})
	if _, err := c.Prepare(ctx, false, time.Now()); err == nil || !strings.Contains(err.Error(), "disagree on --secrets-encryption-provider") {
		t.Errorf("prepare with servers of two providers: %v", err)
	}

	c, _ = cluster(t, map[string]string{"a": AESCBC, "stuck": AESCBC}, map[string]string{"a": "198.51.100.1", "stuck": "198.51.100.2"})
	c.Wait = 300 * time.Millisecond
	if _, err := c.Prepare(ctx, false, time.Now()); err == nil || !strings.Contains(err.Error(), "the servers stuck did not load it") {
		t.Errorf("prepare with a server that does not load it: %v", err)
	}
	if _, err := c.Rotate(ctx, false); err == nil || !strings.Contains(err.Error(), "the servers stuck have not loaded the stage prepare") {
		t.Errorf("rotate with a server behind: %v", err)
	}
	if changed, err := c.Rotate(ctx, true); changed.Stage != StageRotate || err == nil || !strings.Contains(err.Error(), "stuck did not load it") {
		t.Errorf("rotate --force with a server behind: %+v, %v; want it recorded, and the server named", changed, err)
	}
	if _, cfg, _ := c.read(ctx); len(cfg) != 3 || cfg[0].Provider != AESCBC || cfg[1].Provider != AESCBC {
		t.Errorf("rotate --force: keys %v, want the prepared key first", cfg)
	}
}
