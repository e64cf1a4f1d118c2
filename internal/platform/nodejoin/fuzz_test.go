package nodejoin

import (
	"context"
	"errors"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
)

// FuzzAdmit: whatever node name and password a joining host sends, the
// join is refused (ErrRefused) or the name is bound to the password: the
// same password joins again, another is refused (ErrNameTaken).
func FuzzAdmit(f *testing.F) {
	for _, seed := range []struct{ node, password string }{
		{"n1", "0123456789abcdef0123456789abcdef"},
		{"agent-0.example", "a password of sixteen+ chars"},
		{"N_1", "0123456789abcdef"},
		{"n3", "secret"},
		{"", ""},
		{"a.b-c", "\x00\xff\xfe 0123456789abcdef"},
	} {
		f.Add(seed.node, seed.password)
	}
	f.Fuzz(func(t *testing.T, node, password string) {
		ctx := context.Background()
		client := fake.NewClientset()
		if _, err := Admit(ctx, client, node, password); err != nil {
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("Admit(%q, %q) = %v, want a refusal (ErrRefused) or a join", node, password, err)
			}
			return
		}
		if _, err := Admit(ctx, client, node, password); err != nil {
			t.Fatalf("Admit(%q) again with its password: %v", node, err)
		}
		if _, err := Admit(ctx, client, node, password+"-other"); !errors.Is(err, ErrNameTaken) {
			t.Fatalf("Admit(%q) with another password = %v, want ErrNameTaken", node, err)
		}
	})
}
