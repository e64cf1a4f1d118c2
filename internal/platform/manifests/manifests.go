// Package manifests reads Kubernetes manifests from files as kubectl and
// envtest take them: a file, or the .yaml, .yml and .json files directly
// in a directory, each holding one or more YAML or JSON documents. Every
// document keeps where it came from, for errors.
package manifests

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Document is one manifest of a file.
type Document struct {
	// Source is "<file>:<line> (document <n>)", the line the document
	// starts on.
	Source string
	metav1.TypeMeta
	// Data is the document as written.
	Data []byte
}

// Files returns path if it is a file, else the .yaml, .yml and .json files
// directly in it, sorted by name.
func Files(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if !e.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
			files = append(files, filepath.Join(path, e.Name()))
		}
	}
	return files, nil
}

// ReadFile returns the documents of file, leaving out empty ones and those
// with neither kind nor apiVersion (only comments, an empty map). A
// document that does not parse is an error naming its source.
func ReadFile(file string) ([]Document, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return Parse(file, data)
}

// Parse is ReadFile of data, read from file: Split, then each document's
// kind and apiVersion read.
func Parse(file string, data []byte) ([]Document, error) {
	split, err := Split(file, data)
	if err != nil {
		return nil, err
	}
	docs := split[:0]
	for _, d := range split {
		if err := yaml.Unmarshal(d.Data, &d.TypeMeta); err != nil {
			return nil, fmt.Errorf("%s: %w", d.Source, err)
		}
		if d.Kind != "" || d.APIVersion != "" {
			docs = append(docs, d)
		}
	}
	return docs, nil
}

// Split returns the documents of data, read from file, leaving out empty
// ones, without decoding them (their TypeMeta is zero): for a reader that
// decodes each whole document anyway, and would otherwise parse it twice.
// Documents are separated as kubectl's reader separates them
// (utilyaml.YAMLReader): by a line that starts with "---", followed by
// nothing but spaces or a comment; each keeps the line it starts on, from
// which a YAML error's "line n" counts.
func Split(file string, data []byte) ([]Document, error) {
	var docs []Document
	n, line, start := 0, 0, 1
	var doc []byte
	end := func() {
		if len(doc) == 0 {
			return
		}
		n++
		data := doc
		doc = nil
		if len(bytes.TrimSpace(data)) > 0 {
			docs = append(docs, Document{Source: fmt.Sprintf("%s:%d (document %d)", file, start, n), Data: data})
		}
	}
	for l := range bytes.Lines(data) {
		line++
		if rest, ok := bytes.CutPrefix(l, []byte(separator)); ok {
			if trimmed := bytes.TrimSpace(rest); len(trimmed) > 0 && trimmed[0] != '#' {
				return nil, fmt.Errorf("%s:%d: invalid YAML document separator: %s", file, line, trimmed)
			}
			end()
			start = line + 1
			continue
		}
		doc = append(doc, l...)
	}
	end()
	return docs, nil
}

// separator begins the line that separates two YAML documents.
const separator = "---"
