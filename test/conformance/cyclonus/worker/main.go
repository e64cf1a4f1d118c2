// Command worker is cyclonus's worker (its cmd/worker: a batch of
// requests in, their results out, as JSON) connecting from its own
// process. cyclonus's runs `agnhost connect` for each request: 36 per
// source Pod, 324 programs of 60 MB started per probe, which took two
// cores 11–16 s. This one connects as `agnhost connect --timeout=1s`
// does, to the same verdicts: TCP connected, or a UDP datagram
// answered, within a second of the name being resolved; a failure is
// tried once more, as cyclonus's worker tries it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/mattfenwick/cyclonus/pkg/worker"
	v1 "k8s.io/api/core/v1"
)

// timeout is agnhost connect's --timeout as cyclonus passes it.
const timeout = time.Second

// resolveTimeout bounds the name's lookup, which agnhost leaves to the
// resolver's own timeouts (a policy that denies DNS fails it).
const resolveTimeout = 15 * time.Second

func main() {
	jobs := flag.String("jobs", "", "the batch of requests, as JSON")
	flag.Parse()
	var batch worker.Batch
	if err := json.Unmarshal([]byte(*jobs), &batch); err != nil {
		fail(err)
	}
	if err := batch.IsValid(); err != nil {
		fail(err)
	}
	results := make([]*worker.Result, len(batch.Requests))
	var wg sync.WaitGroup
	for i, r := range batch.Requests {
		wg.Go(func() {
			err := connect(r)
			if err != nil {
				err = connect(r)
			}
			results[i] = &worker.Result{Request: r}
			if err != nil {
				results[i].Error = err.Error()
			}
		})
	}
	wg.Wait()
	out, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		fail(err)
	}
	fmt.Println(string(out))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// connect makes r's connection as agnhost connect does.
func connect(r *worker.Request) error {
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, r.Host)
	if err != nil {
		return fmt.Errorf("DNS: %w", err)
	}
	addr := net.JoinHostPort(addrs[0], fmt.Sprint(r.Port))
	switch r.Protocol {
	case v1.ProtocolTCP:
		conn, err := net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			return err
		}
		return conn.Close()
	case v1.ProtocolUDP:
		conn, err := net.Dial("udp", addr)
		if err != nil {
			return err
		}
		defer conn.Close()
		if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
			return err
		}
		if _, err := conn.Write([]byte("hostname\n")); err != nil {
			return err
		}
		buf := make([]byte, 1024)
		n, err := conn.Read(buf)
		if err == nil && n == 0 {
			err = fmt.Errorf("no data received from the server")
		}
		return err
	}
	return fmt.Errorf("protocol %s: not supported here", r.Protocol)
}
