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

// Parse is ReadFile of data, read from file. Documents are separated as
// kubectl's reader separates them (utilyaml.YAMLReader): by a line that
// starts with "---", followed by nothing but spaces or a comment; each
// keeps the line it starts on, from which a YAML error's "line n" counts.
func Parse(file string, data []byte) ([]Document, error) {
	var docs []Document
	n, line, start := 0, 0, 1
	var doc []byte
	end := func() error {
		if len(doc) == 0 {
			return nil
		}
		n++
		data := doc
		doc = nil
		if len(bytes.TrimSpace(data)) == 0 {
			return nil
		}
		d := Document{Source: fmt.Sprintf("%s:%d (document %d)", file, start, n), Data: data}
		if err := yaml.Unmarshal(data, &d.TypeMeta); err != nil {
			return fmt.Errorf("%s: %w", d.Source, err)
		}
		if d.Kind != "" || d.APIVersion != "" {
			docs = append(docs, d)
		}
		return nil
	}
	for l := range bytes.Lines(data) {
		line++
		if rest, ok := bytes.CutPrefix(l, []byte(separator)); ok {
			if trimmed := bytes.TrimSpace(rest); len(trimmed) > 0 && trimmed[0] != '#' {
				return nil, fmt.Errorf("%s:%d: invalid YAML document separator: %s", file, line, trimmed)
			}
			if err := end(); err != nil {
				return nil, err
			}
			start = line + 1
			continue
		}
		doc = append(doc, l...)
	}
	if err := end(); err != nil {
		return nil, err
	}
	return docs, nil
}

// separator begins the line that separates two YAML documents.
const separator = "---"
