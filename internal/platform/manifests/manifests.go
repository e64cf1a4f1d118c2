// Package manifests reads Kubernetes manifests from files as kubectl and
// envtest take them: a file, or the .yaml, .yml and .json files directly
// in a directory, each holding one or more YAML or JSON documents. Every
// document keeps where it came from, for errors.
package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Document is one manifest of a file.
type Document struct {
	// Source is "<file> (document <n>)".
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
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var docs []Document
	for n := 1; ; n++ {
		data, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		doc := Document{Source: fmt.Sprintf("%s (document %d)", file, n), Data: data}
		if err := yaml.Unmarshal(data, &doc.TypeMeta); err != nil {
			return nil, fmt.Errorf("%s: %w", doc.Source, err)
		}
		if doc.Kind == "" && doc.APIVersion == "" {
			continue
		}
		docs = append(docs, doc)
	}
}
