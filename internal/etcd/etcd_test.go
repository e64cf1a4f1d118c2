package etcd

import (
	"context"
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
