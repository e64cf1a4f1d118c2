package etcd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestStartWriteRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	start := time.Now()
	s, err := Start(ctx, Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first start took %s", time.Since(start))
	if _, err := s.Client().Put(ctx, "/registry/k", "v"); err != nil {
		t.Fatalf("put through the in-process client: %v", err)
	}
	// The unix socket serves other processes' clients.
	c, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(ctx, "/registry/k")
	c.Close()
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("get over the socket: %v %v", resp, err)
	}
	s.Close()
	s.Close() // idempotent

	start = time.Now()
	s, err = Start(ctx, Config{Dir: dir})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Logf("restart took %s", time.Since(start))
	defer s.Close()
	resp, err = s.Client().Get(ctx, "/registry/k")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("data lost across restart: %v %v", resp, err)
	}
}

func TestCheckDataDir(t *testing.T) {
	if err := CheckDataDir(t.TempDir()); err != nil {
		t.Fatalf("empty dir: %v", err)
	}
	dir := t.TempDir()
	s, err := Start(context.Background(), Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().Put(context.Background(), "/k", "v"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := CheckDataDir(dir); err != nil {
		t.Fatalf("data written by etcd: %v", err)
	}

	tests := []struct {
		name, file string
	}{
		{name: "garbage database", file: "member/snap/db"},
		{name: "garbage write-ahead log", file: "member/wal/0000000000000000-0000000000000000.wal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := t.TempDir()
			if err := os.MkdirAll(filepath.Join(bad, filepath.Dir(tt.file)), 0o700); err != nil {
				t.Fatal(err)
			}
			garbage := []byte(strings.Repeat("not etcd data ", 1000))
			if err := os.WriteFile(filepath.Join(bad, tt.file), garbage, 0o600); err != nil {
				t.Fatal(err)
			}
			err := CheckDataDir(bad)
			if err == nil {
				t.Fatal("damaged data accepted")
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			got, _ := os.ReadFile(filepath.Join(bad, tt.file))
			if string(got) != string(garbage) {
				t.Error("the check changed the file")
			}
		})
	}
}
