package manifests

import (
	"strings"
	"testing"
)

// FuzzParse: any file in the manifests folder parses into documents or is
// refused with an error naming the file; none panics.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
		"--- # comment\n---\n",
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c}\n",
		"kind: [\n", "\t- a\n", "{\"apiVersion\":\"v1\",\"kind\":\"Secret\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := Parse("f.yaml", data); err != nil && !strings.Contains(err.Error(), "f.yaml") {
			t.Errorf("Parse(%q): the error does not name the file: %v", data, err)
		}
	})
}
