// Command testcontainer is the program of the container images the tests
// run on containerd (harness.StartContainerd), built static so an image
// needs nothing else: images are made on the machine, never pulled.
//
//	testcontainer pause         wait for SIGTERM or SIGINT (a Pod sandbox's pause)
//	testcontainer serve PORT    answer each TCP connection on PORT with one line,
//	                            "hello from <hostname>"
//	testcontainer echo ARGS...  print ARGS (for exec)
//	testcontainer write FILE TEXT  write TEXT to FILE (for exec)
//	testcontainer cat FILE      print FILE (for exec)
//	testcontainer dial HOST:PORT  print the first line HOST:PORT answers (for exec;
//	                            HOST may be a name, resolved as the Pod's
//	                            resolv.conf says)
//	testcontainer whoami PERIOD every PERIOD, ask the API server who the Pod's
//	                            service account token says it is, and print
//	                            "<seconds since start> <HTTP status> <user>"
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
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
		return fmt.Errorf("usage: testcontainer pause | serve PORT | echo ARGS... | write FILE TEXT | cat FILE | dial HOST:PORT | whoami PERIOD")
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
