package conformance

import (
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
)

// Result is what a ginkgo run's JUnit report says of the specs it ran
// that count (ConformanceSpec, AnySpec, AnyCase).
type Result struct {
	Passed, Failed, Skipped int
	// Duration is the run's, as ginkgo measured it.
	Duration time.Duration
	// Failures are the failed specs, by name.
	Failures []Failure
}

// Failure is a failed spec and the start of its failure message.
type Failure struct {
	Spec, Message string
}

// junit is the part of a JUnit report a Result needs: ginkgo's, whose
// root is <testsuites>, or cyclonus's, whose root is its one <testsuite>
// and whose cases have no status, only a <failure> when they failed.
type junit struct {
	XMLName xml.Name
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Time  float64 `xml:"time,attr"`
	Cases []struct {
		Name    string  `xml:"name,attr"`
		Status  string  `xml:"status,attr"`
		Time    float64 `xml:"time,attr"`
		Failure *struct {
			Message string `xml:"message,attr"`
			Text    string `xml:",chardata"`
		} `xml:"failure"`
		Error *struct {
			Message string `xml:"message,attr"`
			Text    string `xml:",chardata"`
		} `xml:"error"`
		Skipped *struct {
			Message string `xml:"message,attr"`
		} `xml:"skipped"`
	} `xml:"testcase"`
}

// ConformanceSpec counts the [Conformance] specs of a report.
func ConformanceSpec(name string) bool { return strings.Contains(name, "[Conformance]") }

// AnyCase counts every case of a report: cyclonus's, which has no suite
// nodes.
func AnyCase(string) bool { return true }

// AnySpec counts every spec of a report, not the suite's own nodes
// ([SynchronizedBeforeSuite], ...).
func AnySpec(name string) bool { return strings.HasPrefix(name, "[It] ") }

// ReadResult reads the ginkgo JUnit report at path. Only the specs the
// run selected that counts says count: the report lists the suite's
// others too, skipped by its filters.
func ReadResult(path string, counts func(spec string) bool) (Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Result{}, err
	}
	var j junit
	if err := xml.Unmarshal(b, &j); err != nil {
		return Result{}, fmt.Errorf("%s: %w", path, err)
	}
	if j.XMLName.Local == "testsuite" {
		var s junitSuite
		if err := xml.Unmarshal(b, &s); err != nil {
			return Result{}, fmt.Errorf("%s: %w", path, err)
		}
		j.Suites = []junitSuite{s}
	}
	var r Result
	for _, s := range j.Suites {
		r.Duration += time.Duration(s.Time * float64(time.Second))
		for _, c := range s.Cases {
			if !counts(c.Name) {
				continue
			}
			switch {
			case c.Status == "passed", c.Status == "" && c.Failure == nil && c.Error == nil && c.Skipped == nil:
				r.Passed++
			case c.Status == "skipped" && c.Skipped != nil && c.Skipped.Message == "skipped":
				// Not selected: ginkgo's filters left it out.
			case c.Status == "skipped" || c.Status == "pending":
				// Selected, and skipped as it ran (e2eskipper: "skipped - why").
				r.Skipped++
			default:
				r.Failed++
				msg := c.Status
				if c.Failure != nil {
					msg = firstLine(c.Failure.Message, c.Failure.Text)
				} else if c.Error != nil {
					msg = firstLine(c.Error.Message, c.Error.Text)
				}
				r.Failures = append(r.Failures, Failure{Spec: strings.TrimSpace(c.Name), Message: msg})
			}
		}
	}
	slices.SortFunc(r.Failures, func(a, b Failure) int { return strings.Compare(a.Spec, b.Spec) })
	return r, nil
}

// firstLine is the start of the first non-empty text, its lines joined
// (gomega's "Expected" alone says nothing) and cut at 200 characters.
func firstLine(texts ...string) string {
	for _, t := range texts {
		if l := strings.Join(strings.Fields(t), " "); l != "" {
			if len(l) > 200 {
				l = l[:200] + "..."
			}
			return l
		}
	}
	return ""
}

// WriteSummary writes the runs' results as a Markdown table, then each
// failure's spec and first error line.
func WriteSummary(w io.Writer, runs map[string]Result) {
	names := slices.Sorted(maps.Keys(runs))
	fmt.Fprintln(w, "| run | passed | failed | skipped | duration |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	var total Result
	for _, n := range names {
		r := runs[n]
		fmt.Fprintf(w, "| %s | %d | %d | %d | %s |\n", n, r.Passed, r.Failed, r.Skipped, r.Duration.Round(time.Second))
		total.Passed += r.Passed
		total.Failed += r.Failed
		total.Skipped += r.Skipped
		total.Duration += r.Duration
	}
	if len(names) > 1 {
		fmt.Fprintf(w, "| all | %d | %d | %d | %s |\n", total.Passed, total.Failed, total.Skipped, total.Duration.Round(time.Second))
	}
	for _, n := range names {
		for _, f := range runs[n].Failures {
			fmt.Fprintf(w, "\n- FAIL %s\n  %s\n", f.Spec, f.Message)
		}
	}
}
