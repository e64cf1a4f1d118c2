// Command typecheck type-checks packages and their tests from source for
// other platforms, their dependencies too, without compiling any: CI's
// check that the test harness builds for the platforms operator authors
// test on. `go vet` for another platform first compiles the whole
// dependency graph for it, cold.
//
//	go run ./hack/typecheck -platforms darwin/arm64,windows/amd64 ./kubeboottest/... ./test/operator/...
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"golang.org/x/tools/go/packages"
)

func main() {
	platforms := flag.String("platforms", "", "comma-separated os/arch pairs to type-check for, as GOOS/GOARCH")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: typecheck -platforms os/arch[,os/arch...] packages...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *platforms == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	for _, platform := range strings.Split(*platforms, ",") {
		goos, goarch, ok := strings.Cut(platform, "/")
		if !ok || goos == "" || goarch == "" {
			fmt.Fprintf(os.Stderr, "typecheck: -platforms: %q is not os/arch\n", platform)
			os.Exit(2)
		}
		if err := typecheck(goos, goarch, flag.Args()); err != nil {
			fmt.Fprintf(os.Stderr, "typecheck: %s: %v\n", platform, err)
			os.Exit(1)
		}
	}
}

// typecheck loads patterns, with their tests, as goos/goarch builds them.
func typecheck(goos, goarch string, patterns []string) error {
	// LoadAllSyntax type-checks every package from its source: types
	// without syntax would have go list compile the dependencies for
	// their export data, the cost this avoids.
	cfg := &packages.Config{
		Mode:  packages.LoadAllSyntax,
		Tests: true,
		Env:   append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch),
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return err
	}
	if n := packages.PrintErrors(pkgs); n > 0 {
		return fmt.Errorf("%d errors", n)
	}
	fmt.Printf("typecheck: %s/%s: %d packages and their tests type-check\n", goos, goarch, len(pkgs))
	return nil
}
