package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// This file reads the reference captures in testdata/ and parses the
// column layout kubectl prints.

// readTestdata returns testdata/name.
func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// refOutput returns what the reference kubectl printed for command (the
// text after "$ " in kubectl-outputs.txt), without the trailing blank line.
func refOutput(t *testing.T, command string) string {
	t.Helper()
	text := readTestdata(t, "kubectl-outputs.txt")
	for _, block := range strings.Split("\n"+text, "\n$ ")[1:] {
		head, body, _ := strings.Cut(block, "\n")
		if head == command {
			return strings.TrimRight(body, "\n")
		}
	}
	t.Fatalf("kubectl-outputs.txt has no %q", command)
	return ""
}

// refStatusText returns the body recorded under "## title" in
// status-bodies.txt.
func refStatusText(t *testing.T, title string) string {
	t.Helper()
	text := readTestdata(t, "status-bodies.txt")
	for _, block := range strings.Split("\n"+text, "\n## ")[1:] {
		head, body, _ := strings.Cut(block, "\n")
		if head == title {
			return strings.TrimSpace(body)
		}
	}
	t.Fatalf("status-bodies.txt has no %q", title)
	return ""
}

// refStatus decodes the Status recorded under title, after replacing each
// old string of replacements with its new one (names, IPs and ports that
// differ between the capture and this run).
func refStatus(t *testing.T, title string, replacements ...string) metav1.Status {
	t.Helper()
	text := strings.NewReplacer(replacements...).Replace(refStatusText(t, title))
	var st metav1.Status
	if err := json.Unmarshal([]byte(text), &st); err != nil {
		t.Fatalf("status %q: %v", title, err)
	}
	return st
}

// column is one Table column definition.
type column struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Format      string `json:"format"`
	Description string `json:"description"`
	Priority    int32  `json:"priority"`
}

// refColumns returns the column definitions in testdata/table-<resource>.json.
func refColumns(t *testing.T, resource string) []column {
	t.Helper()
	var tbl struct {
		ColumnDefinitions []column `json:"columnDefinitions"`
	}
	if err := json.Unmarshal([]byte(readTestdata(t, "table-"+resource+".json")), &tbl); err != nil {
		t.Fatalf("table-%s.json: %v", resource, err)
	}
	return tbl.ColumnDefinitions
}

// refHeader is the header kubectl prints for the reference columns: upper
// case names, priority 0 only unless wide.
func refHeader(t *testing.T, resource string, wide bool) []string {
	t.Helper()
	var h []string
	for _, c := range refColumns(t, resource) {
		if wide || c.Priority == 0 {
			h = append(h, strings.ToUpper(c.Name))
		}
	}
	return h
}

// table is kubectl's column output split into cells.
type table struct {
	header []string
	rows   [][]string
}

var headerCellRE = regexp.MustCompile(`\S+( \S+)*`)

// parseTable splits kubectl output at the columns of its header line:
// names are separated by two or more spaces (names such as LAST SEEN
// contain one), and every cell starts where its header name starts.
func parseTable(t *testing.T, out string) table {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) == "" {
		t.Fatalf("no table in output %q", out)
	}
	locs := headerCellRE.FindAllStringIndex(lines[0], -1)
	var tb table
	for _, l := range locs {
		tb.header = append(tb.header, lines[0][l[0]:l[1]])
	}
	for _, line := range lines[1:] {
		var row []string
		for i, l := range locs {
			start, end := l[0], len(line)
			if i+1 < len(locs) {
				end = min(locs[i+1][0], len(line))
			}
			cell := ""
			if start < len(line) {
				cell = strings.TrimSpace(line[start:end])
			}
			row = append(row, cell)
		}
		tb.rows = append(tb.rows, row)
	}
	return tb
}

// find returns the rows whose cells match want (column name to anchored
// regexp); columns of the table missing from want fail the test, columns of
// want missing from the table are ignored.
func (tb table) find(t *testing.T, want map[string]string) [][]string {
	t.Helper()
	var out [][]string
	for _, row := range tb.rows {
		ok := true
		for i, h := range tb.header {
			pat, found := want[h]
			if !found {
				t.Fatalf("no expectation for column %q (header %q)", h, tb.header)
			}
			if !regexp.MustCompile("^(?:" + pat + ")$").MatchString(row[i]) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, row)
		}
	}
	return out
}

// requireRow fails unless exactly one row of tb matches want.
func requireRow(t *testing.T, what string, tb table, want map[string]string) {
	t.Helper()
	if got := tb.find(t, want); len(got) != 1 {
		t.Errorf("%s: %d rows match %v, want 1\nheader: %q\nrows: %q", what, len(got), want, tb.header, tb.rows)
	}
}

// column returns the cells of the named column.
func (tb table) column(name string) []string {
	for i, h := range tb.header {
		if h == name {
			var out []string
			for _, r := range tb.rows {
				out = append(out, r[i])
			}
			return out
		}
	}
	return nil
}

// kubectlInvalid is how kubectl prints an Invalid Status: one cause on the
// line, several as a bulleted list.
func kubectlInvalid(st metav1.Status) string {
	prefix := fmt.Sprintf("The %s %q is invalid: ", st.Details.Kind, st.Details.Name)
	if len(st.Details.Causes) == 1 {
		c := st.Details.Causes[0]
		return prefix + c.Field + ": " + c.Message
	}
	var b strings.Builder
	b.WriteString(prefix)
	for _, c := range st.Details.Causes {
		b.WriteString("\n* " + c.Field + ": " + c.Message)
	}
	return b.String()
}

// decodeStatus decodes a Status response body.
func decodeStatus(t *testing.T, body []byte) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("response is not a Status: %v\n%s", err, body)
	}
	return st
}

// age matches what kubectl prints in an AGE column during this suite.
const age = `[0-9]+s|[0-9]+m[0-9]*s?`

// lit quotes s as a regexp matching exactly s.
func lit(s string) string { return regexp.QuoteMeta(s) }

// requireStatus fails unless the response is the Status want: same HTTP
// code, status, reason, message and details (name, kind, causes).
func requireStatus(t *testing.T, what string, code int, body []byte, want metav1.Status) {
	t.Helper()
	if code != int(want.Code) {
		t.Errorf("%s: HTTP %d, want %d\n%s", what, code, want.Code, body)
		return
	}
	got := decodeStatus(t, body)
	if got.Status != want.Status || got.Reason != want.Reason || got.Message != want.Message || got.Code != want.Code {
		t.Errorf("%s: Status\n  got  %s %s %d %q\n  want %s %s %d %q", what,
			got.Status, got.Reason, got.Code, got.Message, want.Status, want.Reason, want.Code, want.Message)
	}
	gotDetails, _ := json.Marshal(got.Details)
	wantDetails, _ := json.Marshal(want.Details)
	if string(gotDetails) != string(wantDetails) {
		t.Errorf("%s: details\n  got  %s\n  want %s", what, gotDetails, wantDetails)
	}
}
