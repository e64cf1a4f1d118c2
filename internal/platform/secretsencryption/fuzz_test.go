package secretsencryption

import (
	"slices"
	"testing"
	"time"
)

// FuzzParseConfig: a configuration file either parses to keys that
// marshal to a file that parses back to them, or is refused; none panics.
func FuzzParseConfig(f *testing.F) {
	key, _ := newKey(AESCBC, nil, time.Unix(1, 0))
	box, _ := newKey(Secretbox, nil, time.Unix(2, 0))
	for _, c := range []Config{{key, {Provider: Identity}}, {{Provider: Identity}, key, box}, {box}} {
		data, _ := c.Marshal()
		f.Add(data)
	}
	f.Add([]byte("kind: EncryptionConfiguration\napiVersion: apiserver.config.k8s.io/v1\nresources:\n- resources: [secrets]\n  providers: [{kms: {name: x}}]\n"))
	f.Add([]byte("resources: [{resources: [secrets, configmaps]}]"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		out, err := c.Marshal()
		if err != nil {
			t.Fatalf("ParseConfig(%q) = %v, which does not marshal: %v", data, c, err)
		}
		back, err := ParseConfig(out)
		if err != nil || !slices.Equal(back, c) {
			t.Errorf("ParseConfig(%q) = %v, marshalled as %q, parsed back as %v, %v", data, c, out, back, err)
		}
	})
}

// FuzzUnseal: a record's sealed value from anyone who can write the
// ConfigMap opens with the token only if sealed with it; anything else is
// refused, never a panic.
func FuzzUnseal(f *testing.F) {
	sealed, err := seal("the-password-of-a-token", []byte("keys"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sealed)
	f.Add([]byte(sealVersion))
	f.Add(append([]byte(sealVersion), make([]byte, 28)...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		// Only a value sealed with the password opens (the seed, sealed
		// anew by each fuzzing process, is one): as what was sealed.
		plain, err := unseal("the-password-of-a-token", data)
		if err == nil && string(plain) != "keys" {
			t.Errorf("unseal(%q) opened as %q", data, plain)
		}
	})
}
