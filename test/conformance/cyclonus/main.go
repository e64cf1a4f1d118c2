// Command cyclonus runs cyclonus's generated NetworkPolicy cases
// (github.com/mattfenwick/cyclonus v0.5.6) on the cluster KUBECONFIG
// names, as `cyclonus generate` does, but with its batch probes: each
// probe is one exec per source Pod, whose worker (cyclonus's cmd/worker,
// in its image) connects to every target, instead of one exec per pair
// (81 to 324 per probe, a minute and a half each on two cores). The CLI
// has batch probes switched off.
//
// It is a module of its own: cyclonus needs tablewriter's v0 API, which
// kubeboot's graph (flannel) raises to v1. test/conformance builds it and
// cyclonus's worker from here.
package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/mattfenwick/cyclonus/pkg/connectivity"
	"github.com/mattfenwick/cyclonus/pkg/connectivity/probe"
	"github.com/mattfenwick/cyclonus/pkg/generator"
	"github.com/mattfenwick/cyclonus/pkg/kube"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cyclonus:", err)
		os.Exit(1)
	}
}

func run() error {
	include := flag.String("include", "", "run the cases with any of these comma-separated tags (default: all)")
	exclude := flag.String("exclude", "", "leave out the cases with any of these comma-separated tags")
	focus := flag.String("focus", "", "of those, run only the cases whose description this regexp matches")
	protocols := flag.String("server-protocol", "TCP,UDP", "the protocols the Pods serve on")
	junit := flag.String("junit-results-file", "", "write a JUnit report of the cases here")
	wait := flag.Int("perturbation-wait-seconds", 2, "seconds to wait after each change before probing")
	retries := flag.Int("retries", 2, "probes to repeat when one disagrees with the expected reachability")
	jobTimeout := flag.Int("job-timeout-seconds", 2, "agnhost connect's --timeout")
	podTimeout := flag.Int("pod-creation-timeout-seconds", 300, "seconds to wait for the Pods to run")
	dryRun := flag.Bool("dry-run", false, "print the cases and stop")
	flag.Parse()
	tags := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	if err := generator.ValidateTags(append(tags(*include), tags(*exclude)...)); err != nil {
		return err
	}

	var k kube.IKubernetes
	if *dryRun {
		k = kube.NewMockKubernetes(1.0)
	} else {
		// cyclonus's own client (kube.NewKubernetesForContext) keeps
		// client-go's default limit of 5 requests a second: resetting
		// and checking the 9 Pods, their Services and Namespaces before
		// each case, and a probe's 9 execs, waited seconds on it.
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
		if err != nil {
			return err
		}
		cfg.QPS, cfg.Burst = 100, 200
		clientset, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		k = &kube.Kubernetes{ClientSet: clientset, RestConfig: cfg}
	}
	var serverProtocols []v1.Protocol
	for _, p := range tags(*protocols) {
		serverProtocols = append(serverProtocols, v1.Protocol(strings.ToUpper(p)))
	}
	const batch = true
	namespaces := []string{"x", "y", "z"}
	resources, err := probe.NewDefaultResources(k, namespaces, []string{"a", "b", "c"}, []int{80, 81}, serverProtocols,
		nil, *podTimeout, batch, "")
	if err != nil {
		return err
	}
	zc, err := resources.GetPod("z", "c")
	if err != nil {
		return err
	}
	focused, err := regexp.Compile(*focus)
	if err != nil {
		return fmt.Errorf("-focus: %w", err)
	}
	cases := slices.DeleteFunc(generator.NewTestCaseGenerator(true, zc.IP, namespaces, tags(*include), tags(*exclude)).GenerateTestCases(),
		func(c *generator.TestCase) bool { return !focused.MatchString(c.Description) })
	fmt.Printf("testing %d cases\n", len(cases))
	for i, c := range cases {
		fmt.Printf("test #%d: %s\n - tags: %s\n", i+1, c.Description, strings.Join(c.Tags.Keys(), ", "))
	}
	if *dryRun {
		return nil
	}

	interpreter := connectivity.NewInterpreter(k, resources, &connectivity.InterpreterConfig{
		ResetClusterBeforeTestCase:       true,
		KubeProbeRetries:                 *retries,
		PerturbationWaitSeconds:          *wait,
		VerifyClusterStateBeforeTestCase: true,
		BatchJobs:                        batch,
		JobTimeoutSeconds:                *jobTimeout,
	})
	printer := &connectivity.Printer{JunitResultsFile: *junit}
	for i, c := range cases {
		fmt.Printf("starting test case #%d\n", i+1)
		result := interpreter.ExecuteTestCase(c)
		if result.Err != nil {
			return fmt.Errorf("case #%d (%s): %w", i+1, c.Description, result.Err)
		}
		printer.PrintTestCaseResult(result)
		fmt.Printf("finished policy #%d\n", i+1)
	}
	printer.PrintSummary()
	return nil
}
