// Command testcontainer is the program of the container images the tests
// run on containerd (harness.StartContainerd), built static so an image
// needs nothing else: images are made on the machine, never pulled.
//
//	testcontainer pause         wait for SIGTERM or SIGINT (a Pod sandbox's pause)
//	testcontainer serve PORT    answer each TCP connection on PORT with one line,
//	                            "hello from <hostname>"
//	testcontainer echo ARGS...  print ARGS (for exec)
package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "testcontainer:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: testcontainer pause | serve PORT | echo ARGS...")
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
