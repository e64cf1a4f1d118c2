package nodes

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/kubeboot/kubeboot/internal/platform/cpulabels"
)

var (
	cpuProfile = flag.String("cpuprofile", "",
		"BenchmarkRunning, BenchmarkScheduling: write a CPU profile of kubeboot's server, from -profile-after after its nodes are Ready, to this file, "+
			"and log each component's share (cpulabels)")
	profileFor   = flag.Duration("profile-for", 30*time.Second, "how long -cpuprofile profiles")
	profileAfter = flag.Duration("profile-after", 0, "how long after the nodes are Ready -cpuprofile starts: "+
		"at large sizes the cost per Pod late in the run is what grows")
	heapProfile = flag.String("heapprofile", "",
		"BenchmarkRunning, BenchmarkScheduling: once the load is done, write a heap profile of kubeboot's server, taken after a collection, to this file, "+
			"and log the runtime's live heap against the spans holding it")
)

// startProfiled starts a server with *nodes nodes and, with -cpuprofile,
// a CPU profile of it from -profile-after on; the function returned
// waits for the profile and writes it, and with -heapprofile writes a
// heap profile (with neither, it does nothing).
func startProfiled(b *testing.B) (server, func()) {
	srv := start(b, *nodes)
	var prof *serverProfile
	if *cpuProfile != "" {
		prof = profileServer(srv.socket, *profileAfter, *profileFor)
	}
	return srv, func() {
		if prof != nil {
			prof.write(b, *cpuProfile)
		}
		if *heapProfile != "" {
			writeHeapProfile(b, srv.socket, *heapProfile)
		}
	}
}

// debugClient is an HTTP client of the server's --debug-socket-path.
func debugClient(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
}

// debugGet reads path from the server's debug socket.
func debugGet(client *http.Client, path string) ([]byte, error) {
	resp, err := client.Get("http://server" + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", path, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// writeHeapProfile writes a heap profile of the server, taken after a
// collection, to path, and logs the runtime's figures that the profile's
// text form ends with: the live heap against the spans that hold it (Go's
// heap does not compact, so the difference is room in spans still holding
// live objects) and what the process has from the OS.
func writeHeapProfile(tb testing.TB, socket, path string) {
	client := debugClient(socket)
	data, err := debugGet(client, "/debug/pprof/heap?gc=1")
	if err != nil {
		tb.Fatalf("heap profile: %v", err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	text, err := debugGet(client, "/debug/pprof/heap?debug=1")
	if err != nil {
		tb.Fatalf("heap profile: %v", err)
	}
	var stats []string
	for _, line := range strings.Split(string(text), "\n") {
		for _, name := range []string{"HeapAlloc", "HeapInuse", "HeapIdle", "HeapReleased", "Sys"} {
			if strings.HasPrefix(line, "# "+name+" = ") {
				n, _ := strconv.ParseUint(strings.TrimPrefix(line, "# "+name+" = "), 10, 64)
				stats = append(stats, fmt.Sprintf("%s %d MiB", name, n>>20))
			}
		}
	}
	tb.Logf("heap profile %s, after a collection: %s", path, strings.Join(stats, ", "))
}

// serverProfile is a CPU profile being taken of a server through its
// --debug-socket-path.
type serverProfile struct {
	done chan struct{}
	data []byte
	err  error
}

// profileServer starts taking a CPU profile of d, after waiting for after,
// from the server listening on the debug socket at socket.
func profileServer(socket string, after, d time.Duration) *serverProfile {
	p := &serverProfile{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		time.Sleep(after)
		p.data, p.err = debugGet(debugClient(socket), fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds())))
	}()
	return p
}

// write waits for the profile, writes it to path and logs the share of
// its CPU each component (label cpulabels.Component) took, the API
// server's split by the component it served.
func (p *serverProfile) write(tb testing.TB, path string) {
	<-p.done
	if p.err != nil {
		tb.Fatalf("CPU profile: %v", p.err)
	}
	if err := os.WriteFile(path, p.data, 0o644); err != nil {
		tb.Fatal(err)
	}
	prof, err := profile.ParseData(p.data)
	if err != nil {
		tb.Fatal(err)
	}
	// The CPU samples' value is their time (cpu/nanoseconds).
	cpu := slices.IndexFunc(prof.SampleType, func(st *profile.ValueType) bool { return st.Type == "cpu" })
	if cpu < 0 {
		tb.Fatalf("CPU profile %s has no cpu samples", path)
	}
	var total int64
	shares := map[string]int64{}
	for _, s := range prof.Sample {
		name := "(unlabelled: construction, the runtime)"
		if c := s.Label[cpulabels.Component]; len(c) > 0 {
			name = c[0]
			if client := s.Label[cpulabels.Client]; len(client) > 0 {
				name += " for " + client[0]
			}
		}
		shares[name] += s.Value[cpu]
		total += s.Value[cpu]
	}
	names := slices.SortedFunc(maps.Keys(shares), func(a, b string) int { return cmp.Compare(shares[b], shares[a]) })
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "\n  %5.1f%%  %6.1f s  %s", 100*float64(shares[n])/float64(total), time.Duration(shares[n]).Seconds(), n)
	}
	tb.Logf("CPU profile %s: %.1f s of CPU in %s, by component:%s", path, time.Duration(total).Seconds(),
		time.Duration(prof.DurationNanos).Round(time.Second), b.String())
}
