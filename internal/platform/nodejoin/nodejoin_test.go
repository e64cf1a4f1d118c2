package nodejoin

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
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

// TestCheckJoinToken: a join token is what the API server's authenticator
// says of it; a token whose Secret is stored but not yet in the
// authenticator's cache is asked about again until it is, or for
// tokenCacheLag; a token the store does not hold, or holds with another
// secret, is refused at the first answer.
func TestCheckJoinToken(t *testing.T) {
	defer func(lag, poll time.Duration) { tokenCacheLag, tokenCachePoll = lag, poll }(tokenCacheLag, tokenCachePoll)
	tokenCacheLag, tokenCachePoll = 500*time.Millisecond, 10*time.Millisecond
	const token = "abcdef.0123456789abcdef"
	stored := func(secret string) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: bootstrapapi.BootstrapTokenSecretPrefix + "abcdef", Namespace: metav1.NamespaceSystem},
			Data:       map[string][]byte{bootstrapapi.BootstrapTokenIDKey: []byte("abcdef"), bootstrapapi.BootstrapTokenSecretKey: []byte(secret)},
		}
	}
	for _, tc := range []struct {
		name string
		// secret is the token's Secret in the store, if any.
		secret *corev1.Secret
		// seenAt is the review from which the authenticator knows the
		// token (0: never); groups are then its user's.
		seenAt  int
		groups  []string
		want    error
		reviews int
	}{
		{"known at once", stored("0123456789abcdef"), 1, []string{JoinGroup}, nil, 1},
		{"stored, cached at the third review", stored("0123456789abcdef"), 3, []string{JoinGroup}, nil, 3},
		{"stored, never authenticated", stored("0123456789abcdef"), 0, nil, ErrRefused, -1},
		{"not stored", nil, 0, nil, ErrRefused, 1},
		{"stored with another secret", stored("fedcba9876543210"), 0, nil, ErrRefused, 1},
		{"a kubelet's", stored("0123456789abcdef"), 1, []string{Group}, ErrRefused, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			if tc.secret != nil {
				client = fake.NewClientset(tc.secret)
			}
			reviews := 0
			client.PrependReactor("create", "tokenreviews", func(action clienttesting.Action) (bool, runtime.Object, error) {
				reviews++
				review := action.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
				if review.Spec.Token == token && tc.seenAt > 0 && reviews >= tc.seenAt {
					review.Status = authenticationv1.TokenReviewStatus{Authenticated: true,
						User: authenticationv1.UserInfo{Username: "system:bootstrap:abcdef", Groups: tc.groups}}
				}
				return true, review, nil
			})
			err := CheckJoinToken(context.Background(), client, token)
			if !errors.Is(err, tc.want) {
				t.Fatalf("CheckJoinToken = %v, want %v", err, tc.want)
			}
			switch {
			case tc.reviews > 0 && reviews != tc.reviews:
				t.Errorf("%d reviews, want %d", reviews, tc.reviews)
			case tc.reviews < 0 && reviews < 10:
				t.Errorf("%d reviews: the token was not asked about again while the cache may lag", reviews)
			}
		})
	}
}
