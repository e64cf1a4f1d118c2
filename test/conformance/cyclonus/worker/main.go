// Command worker is cyclonus's worker (its cmd/worker) with every
// request of a batch issued at once: a probe's requests to Pods a policy
// refuses through their Services wait out their timeout twice, and ten
// at a time (cyclonus's default) made one source Pod's 36 requests take
// three such rounds.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/mattfenwick/cyclonus/pkg/worker"
)

func main() {
	jobs := flag.String("jobs", "", "the batch of requests, as JSON")
	concurrency := flag.Int("concurrency", 64, "requests issued at once")
	flag.Parse()
	out, err := worker.RunWorker(*jobs, *concurrency)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(out)
}
