package manifests

import (
	"strings"
	"testing"
)

// TestParse: documents split as kubectl splits them, each named by the
// line it starts on; errors name the file and the document's line.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		data    string
		want    []string // each document's Source and kind
		wantErr string
	}{
		{
			name: "documents, a comment-only one and empty ones left out",
			data: "---\napiVersion: v1\nkind: ConfigMap\n--- # the next\n# only a comment\n---\n---\n\napiVersion: v1\nkind: Secret\n",
			want: []string{"f.yaml:2 (document 1) ConfigMap", "f.yaml:8 (document 3) Secret"},
		},
		{
			name: "JSON",
			data: `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"}}`,
			want: []string{"f.yaml:1 (document 1) Namespace"},
		},
		{
			name: "no final newline, CRLF",
			data: "kind: A\r\n---\r\nkind: B",
			want: []string{"f.yaml:1 (document 1) A", "f.yaml:3 (document 2) B"},
		},
		{
			name:    "malformed YAML in the second document",
			data:    "kind: A\n---\n\nkind: [B\n",
			wantErr: "f.yaml:3 (document 2): error converting YAML to JSON: yaml: line 2",
		},
		{
			name:    "a separator with more on its line",
			data:    "kind: A\n--- kind: B\n",
			wantErr: "f.yaml:2: invalid YAML document separator: kind: B",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := Parse("f.yaml", []byte(tc.data))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range docs {
				got = append(got, d.Source+" "+d.Kind)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("Parse = %q, want %q", got, tc.want)
			}
		})
	}
}
