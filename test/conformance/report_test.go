package conformance

import (
	"bytes"
	"reflect"
	"testing"
	"time"
)

// TestReadResult reads a ginkgo JUnit report: only [Conformance] specs
// count (or, with AnySpec, every spec but the suite's nodes); specs the
// filters left out are not counted, specs skipped as they ran are; a
// failure keeps its message on one line, a timeout its text.
func TestReadResult(t *testing.T) {
	got, err := ReadResult("testdata/junit.xml", ConformanceSpec)
	if err != nil {
		t.Fatal(err)
	}
	want := Result{Passed: 1, Failed: 2, Skipped: 1, Duration: 125500 * time.Millisecond, Failures: []Failure{
		{Spec: "[It] [sig-api-machinery] Aggregator should work [Conformance]", Message: "[TIMEDOUT] A suite timeout occurred"},
		{Spec: "[It] [sig-network] Services should serve a basic endpoint from pods [Conformance]", Message: "failed to get reachability: service is not reachable within 2m0s second line"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ReadResult:\n got %+v\nwant %+v", got, want)
	}
	all, err := ReadResult("testdata/junit.xml", AnySpec)
	if err != nil {
		t.Fatal(err)
	}
	if all.Passed+all.Failed+all.Skipped <= got.Passed+got.Failed+got.Skipped {
		t.Errorf("every spec: %+v, want more than the [Conformance] ones' %+v", all, got)
	}
	if _, err := ReadResult("testdata/missing.xml", ConformanceSpec); err == nil {
		t.Error("ReadResult of a missing report: no error")
	}
}

// TestReadCyclonusResult reads cyclonus's JUnit report: one <testsuite>,
// its cases passed unless they hold a <failure>.
func TestReadCyclonusResult(t *testing.T) {
	got, err := ReadResult("testdata/cyclonus.xml", AnyCase)
	if err != nil {
		t.Fatal(err)
	}
	want := Result{Passed: 1, Failed: 2, Failures: []Failure{
		{Spec: "conflict: ingress and egress"}, {Spec: "egress: deny all"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ReadResult:\n got %+v\nwant %+v", got, want)
	}
}

// TestWriteSummary writes one row per run, a total when there are
// several, and each failure.
func TestWriteSummary(t *testing.T) {
	var b bytes.Buffer
	WriteSummary(&b, map[string]Result{
		"serial":   {Passed: 2, Duration: time.Minute},
		"parallel": {Passed: 3, Failed: 1, Skipped: 1, Duration: 2 * time.Minute, Failures: []Failure{{Spec: "[It] a [Conformance]", Message: "boom"}}},
	})
	want := `| run | passed | failed | skipped | duration |
|---|---|---|---|---|
| parallel | 3 | 1 | 1 | 2m0s |
| serial | 2 | 0 | 0 | 1m0s |
| all | 5 | 1 | 1 | 3m0s |

- FAIL [It] a [Conformance]
  boom
`
	if got := b.String(); got != want {
		t.Errorf("summary:\n%s\nwant:\n%s", got, want)
	}
}
