package clusterjoin

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
)

// TestRecord: the first server's files make the record, --agent-token
// replaces its agent token, a server writes its files at the record as it
// changes, and a rotation changes the record and the file, or nothing.
func TestRecord(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	client := fake.NewClientset()
	first := Record{Client: client, TokenFile: filepath.Join(dir, "token"), AgentTokenFile: filepath.Join(dir, "agent-token")}
	token, err := EnsureToken(first.TokenFile, []byte("the CA's PEM"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Rotate(ctx, "", "a-new-password-of-length"); !errors.Is(err, ErrNoRecord) {
		t.Errorf("a rotation without a record: %v, want ErrNoRecord", err)
	}
	agent := Token{CAHash: token.CAHash, User: AgentUser, Password: "the-agents-password"}
	first.AgentToken = &agent
	syncCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- first.Sync(syncCtx) }()
	record := func() map[string]string {
		s, err := client.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, RecordName, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return map[string]string{"token": string(s.Data[recordTokenKey]), "agent-token": string(s.Data[recordAgentTokenKey])}
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	waitFor("the record made from the files", func() bool {
		r := record()
		return r["token"] == token.String() && r["agent-token"] == agent.String()
	})
	waitFor("the agent token file written from the record", func() bool {
		got, err := ReadToken(first.AgentTokenFile)
		return err == nil && got == agent
	})

	// A second server, whose files are behind, takes the record's.
	dir2 := t.TempDir()
	second := Record{Client: client, TokenFile: filepath.Join(dir2, "token"), AgentTokenFile: filepath.Join(dir2, "agent-token")}
	if _, err := EnsureToken(second.TokenFile, []byte("the CA's PEM")); err != nil {
		t.Fatal(err)
	}
	go func() { _ = second.Sync(syncCtx) }()
	waitFor("the second server's files at the record", func() bool {
		a, errA := ReadToken(second.AgentTokenFile)
		s, errS := ReadToken(second.TokenFile)
		return errA == nil && errS == nil && a == agent && s == token
	})

	// Rotations: a wrong current token or a bad new one change nothing.
	for _, tc := range []struct{ old, next, want string }{
		{"not-the-token", "a-new-password-of-length", "--token is not the cluster's current server token"},
		{token.Password, "short", "--new-token: the password is shorter"},
		{token.String(), token.Password, "--new-token is the current token"},
	} {
		if _, err := second.Rotate(ctx, tc.old, tc.next); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Rotate(%q, %q) = %v, want an error saying %q", tc.old, tc.next, err, tc.want)
		}
	}
	if r := record(); r["token"] != token.String() {
		t.Fatalf("refused rotations changed the record: %v", r)
	}
	next, err := second.Rotate(ctx, token.String(), "a-new-password-of-length")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Token{CAHash: token.CAHash, User: ServerUser, Password: "a-new-password-of-length"}); next != want {
		t.Errorf("rotated to %+v, want %+v", next, want)
	}
	if got, err := ReadToken(second.TokenFile); err != nil || got != next {
		t.Errorf("the rotating server's token file: %+v, %v", got, err)
	}
	waitFor("the first server's token file at the rotated record", func() bool {
		got, err := ReadToken(first.TokenFile)
		return err == nil && got == next
	})
	// The first server's file is the record's: a rotation there from its
	// old token is refused.
	if _, err := first.Rotate(ctx, token.String(), "another-password-of-length"); err == nil {
		t.Error("a rotation from the old token was accepted")
	}
	stop()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Sync: %v", err)
	}
}
