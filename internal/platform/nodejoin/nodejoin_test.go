package nodejoin

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
)

// TestAdmit: a node's first join binds its name to its password and each
// join gets a bootstrap token naming the node, in Group; a join with
// another password, or under the name of a Node that has no binding, is
// refused.
func TestAdmit(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "old"}})
	mine, err := NewPassword()
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := NewPassword()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, node, password string
		want                 error
	}{
		{"first join", "n1", mine, nil},
		{"the same host again", "n1", mine, nil},
		{"another host, same name", "n1", theirs, ErrNameTaken},
		{"another host, another name", "n2", theirs, nil},
		{"a Node without a binding", "old", mine, ErrNameTaken},
		{"a short password", "n3", "secret", ErrRefused},
		{"a name that is no DNS subdomain", "N_1", mine, ErrRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			token, err := Admit(ctx, client, tc.node, tc.password)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Admit = %v, want %v", err, tc.want)
			}
			if err != nil {
				return
			}
			id, _, _ := strings.Cut(token, ".")
			secret, err := client.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, bootstrapapi.BootstrapTokenSecretPrefix+id, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := secret.Annotations[NodeAnnotation]; got != tc.node {
				t.Errorf("token for node %q, want %q", got, tc.node)
			}
			if got := string(secret.Data[bootstrapapi.BootstrapTokenExtraGroupsKey]); got != Group {
				t.Errorf("token groups %q, want %q", got, Group)
			}
			if string(secret.Data[bootstrapapi.BootstrapTokenExpirationKey]) == "" {
				t.Error("the token does not expire")
			}
		})
	}
}
