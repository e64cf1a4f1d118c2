// Command testcontainer is the program of the container images the tests
// run on containerd (harness.EmbeddedContainerd), built static so an image
// needs nothing else: images are made on the machine, never pulled.
//
//	testcontainer pause         wait for SIGTERM or SIGINT (a Pod sandbox's pause)
//	testcontainer serve PORT    answer each TCP connection on PORT with one line,
//	                            "hello from <hostname>"
//	testcontainer http PORT     answer each HTTP request on PORT with
//	                            "hello from <hostname>", each WebSocket message
//	                            with "<hostname>: <message>", and gRPC's health
//	                            service (service <hostname> SERVING), over
//	                            HTTP/1.1 and h2c
//	testcontainer https PORT    the same over TLS, with a certificate for
//	                            <hostname> made at start
//	testcontainer echo ARGS...  print ARGS (for exec)
//	testcontainer write FILE TEXT  write TEXT to FILE (for exec)
//	testcontainer cat FILE      print FILE (for exec)
//	testcontainer dial HOST:PORT  print the first line HOST:PORT answers (for exec;
//	                            HOST may be a name, resolved as the Pod's
//	                            resolv.conf says)
//	testcontainer lookup NAME   print NAME's addresses, A and AAAA records, sorted,
//	                            one a line (for exec)
//	testcontainer dnsload SERVER:PORT NAME COUNT CLIENTS
//	                            ask SERVER COUNT times for NAME's A record over
//	                            UDP from CLIENTS at once, and print
//	                            "<queries/s> <p50 µs> <p99 µs>"
//	testcontainer whoami PERIOD every PERIOD, ask the API server who the Pod's
//	                            service account token says it is, and print
//	                            "<seconds since start> <HTTP status> <user>"
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "testcontainer:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: testcontainer pause | serve PORT | chat PORT | http PORT | https PORT | echo ARGS... | write FILE TEXT | cat FILE | dial HOST:PORT | lookup NAME [SERVER] | dnsload SERVER:PORT NAME COUNT CLIENTS | whoami PERIOD")
	}
	switch args[0] {
	case "pause":
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
		return nil
	case "serve":
		if len(args) != 2 {
			return fmt.Errorf("usage: testcontainer serve PORT")
		}
		return serve(args[1])
	case "chat":
		if len(args) != 2 {
			return fmt.Errorf("usage: testcontainer chat PORT")
		}
		return chat(args[1])
	case "http", "https":
		if len(args) != 2 {
			return fmt.Errorf("usage: testcontainer %s PORT", args[0])
		}
		return serveWeb(args[1], args[0] == "https")
	case "echo":
		fmt.Println(strings.Join(args[1:], " "))
		return nil
	case "write":
		if len(args) != 3 {
			return fmt.Errorf("usage: testcontainer write FILE TEXT")
		}
		return os.WriteFile(args[1], []byte(args[2]), 0o644)
	case "dial":
		if len(args) != 2 {
			return fmt.Errorf("usage: testcontainer dial HOST:PORT")
		}
		c, err := net.DialTimeout("tcp", args[1], 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		fmt.Print(line)
		return err
	case "lookup":
		if len(args) != 2 && len(args) != 3 {
			return fmt.Errorf("usage: testcontainer lookup NAME [SERVER]")
		}
		// Both families' records (A and AAAA), sorted, one a line; asked
		// of SERVER's port 53 if given, else of resolv.conf's servers.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resolver := net.DefaultResolver
		if len(args) == 3 {
			server := net.JoinHostPort(args[2], "53")
			resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, server)
			}}
		}
		addrs, err := resolver.LookupHost(ctx, args[1])
		if err != nil {
			return err
		}
		slices.Sort(addrs)
		fmt.Println(strings.Join(addrs, "\n"))
		return nil
	case "dnsload":
		if len(args) != 5 {
			return fmt.Errorf("usage: testcontainer dnsload SERVER:PORT NAME COUNT CLIENTS")
		}
		count, err := strconv.Atoi(args[3])
		if err != nil {
			return err
		}
		clients, err := strconv.Atoi(args[4])
		if err != nil {
			return err
		}
		return dnsLoad(args[1], args[2], count, clients)
	case "cat":
		if len(args) != 2 {
			return fmt.Errorf("usage: testcontainer cat FILE")
		}
		data, err := os.ReadFile(args[1])
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(data)
		return err
	case "whoami":
		if len(args) != 2 {
			return fmt.Errorf("usage: testcontainer whoami PERIOD")
		}
		period, err := time.ParseDuration(args[1])
		if err != nil {
			return err
		}
		return whoami(period)
	}
	return fmt.Errorf("unknown command %q", args[0])
}

func serve(port string) error {
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return err
	}
	// The first line of the container's log, which the test reads back.
	fmt.Println("serving on :" + port)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	stopped := make(chan struct{})
	go func() {
		<-stop
		close(stopped)
		l.Close()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			select {
			case <-stopped:
				return nil
			default:
				return err
			}
		}
		fmt.Fprintln(c, "hello from "+host)
		c.Close()
	}
}

// chat answers each line a connection sends with the same line, for as
// long as the connection lasts: a connection that outlives a change (of a
// NetworkPolicy) shows whether it still passes.
func chat(port string) error {
	l, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return err
	}
	fmt.Println("chatting on :" + port)
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if _, err := io.WriteString(c, line); err != nil {
					return
				}
			}
		}()
	}
}

// serviceAccountDir is where the kubelet mounts a Pod's projected service
// account token and the cluster's CA.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount/"

// whoami asks the API server (through the kubernetes Service, as
// in-cluster clients do) for a SelfSubjectReview every period, reading
// the token anew each time as client-go does, until SIGTERM.
func whoami(period time.Duration) error {
	ca, err := os.ReadFile(serviceAccountDir + "ca.crt")
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("no certificate in %sca.crt", serviceAccountDir)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	url := "https://" + net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")) +
		"/apis/authentication.k8s.io/v1/selfsubjectreviews"
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	start := time.Now()
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for {
		code, user := selfSubjectReview(client, url)
		fmt.Printf("%d %d %s\n", int(time.Since(start).Seconds()), code, user)
		select {
		case <-stop:
			return nil
		case <-ticker.C:
		}
	}
}

// selfSubjectReview returns the status of one review and the user it
// names, or the error.
func selfSubjectReview(client *http.Client, url string) (int, string) {
	token, err := os.ReadFile(serviceAccountDir + "token")
	if err != nil {
		return 0, err.Error()
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var review struct {
		Status struct {
			UserInfo struct{ Username string } `json:"userInfo"`
		} `json:"status"`
	}
	if json.Unmarshal(body, &review) != nil || review.Status.UserInfo.Username == "" {
		return resp.StatusCode, strings.Join(strings.Fields(string(body)), " ")
	}
	return resp.StatusCode, review.Status.UserInfo.Username
}

// dnsLoad asks server for name's A record count times, from clients
// goroutines each with its own UDP socket, one query at a time, and
// prints queries/s, p50 and p99 in µs. An answer that is not the
// question's, or has no record, fails it.
func dnsLoad(server, name string, count, clients int) error {
	query := func(id uint16) []byte {
		q := []byte{byte(id >> 8), byte(id), 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
		for _, label := range strings.Split(strings.TrimSuffix(name, "."), ".") {
			q = append(q, byte(len(label)))
			q = append(q, label...)
		}
		return append(q, 0, 0, 1, 0, 1) // root, type A, class IN
	}
	var mu sync.Mutex
	var latencies []time.Duration
	errs := make(chan error, clients)
	start := time.Now()
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			conn, err := net.Dial("udp", server)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			buf := make([]byte, 512)
			var own []time.Duration
			for i := c; i < count; i += clients {
				id := uint16(i)
				sent := time.Now()
				if _, err := conn.Write(query(id)); err != nil {
					errs <- err
					return
				}
				_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
				n, err := conn.Read(buf)
				if err != nil {
					errs <- err
					return
				}
				// ID, RCODE 0 and at least one answer.
				if n < 12 || uint16(buf[0])<<8|uint16(buf[1]) != id || buf[3]&0x0f != 0 || buf[6]|buf[7] == 0 {
					errs <- fmt.Errorf("query %d: an answer without the record", i)
					return
				}
				own = append(own, time.Since(sent))
			}
			mu.Lock()
			latencies = append(latencies, own...)
			mu.Unlock()
		}(c)
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	slices.Sort(latencies)
	fmt.Printf("%.0f %d %d\n", float64(len(latencies))/elapsed.Seconds(),
		latencies[len(latencies)/2].Microseconds(), latencies[(len(latencies)*99-1)/100].Microseconds())
	return nil
}
