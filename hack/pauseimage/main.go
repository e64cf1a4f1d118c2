// Command pauseimage makes the sandbox image the binary carries for nodes
// with no registry (containerruntime's pause-<arch>.tar.gz, for the
// machine's architecture, which the binaries of that architecture embed):
// upstream's pause.c,
// of the k8s.io/kubernetes version go.mod requires, built static with the
// machine's C compiler and stripped, alone in one layer, run as 65535, as
// upstream's image is; written as a gzipped image archive
// (go-containerregistry, no container daemon) with the image's name.
//
//	go run ./hack/pauseimage -image registry.k8s.io/pause:3.10.1 -o internal/components/containerruntime/pause-amd64.tar.gz
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/kubeboot/kubeboot/hack/internal/imagebuild"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "pauseimage:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("pauseimage", flag.ContinueOnError)
	image := fs.String("image", "", "the image's name, whose tag is pause's version (registry.k8s.io/pause:3.10.1)")
	out := fs.String("o", "", "where to write the gzipped image archive")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ref, err := name.NewTag(*image)
	if err != nil {
		return fmt.Errorf("-image %q: %w", *image, err)
	}
	if *out == "" {
		return errors.New("-o: where to write the archive is required")
	}
	source, err := pauseSource()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "pauseimage")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "pause")
	for _, cmd := range [][]string{
		{"gcc", "-Os", "-Wall", "-Werror", "-static", "-DVERSION=v" + ref.TagStr(), "-o", bin, source},
		{"strip", bin},
	} {
		if b, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(cmd, " "), err, b)
		}
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	img, err := build(binary)
	if err != nil {
		return err
	}
	var archive bytes.Buffer
	if err := tarball.Write(ref, img, &archive); err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	defer f.Close()
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := io.Copy(zw, &archive); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	fmt.Printf("wrote %s: %s, pause %d bytes, the archive %d bytes gzipped\n", *out, ref, len(binary), fileSize(f))
	return f.Close()
}

// pauseSource is pause.c of the k8s.io/kubernetes module go.mod requires.
func pauseSource() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes").Output()
	if err != nil {
		return "", fmt.Errorf("finding k8s.io/kubernetes: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "build", "pause", "linux", "pause.c"), nil
}

// build is the image: /pause alone, its entrypoint, run as 65535.
func build(binary []byte) (v1.Image, error) {
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	if err := tw.WriteHeader(&tar.Header{Name: "pause", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(binary)), ModTime: time.Unix(0, 0)}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(binary); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return imagebuild.OneLayer(layerTar.Bytes(), runtime.GOARCH, func(cfg *v1.ConfigFile) {
		cfg.Config.Entrypoint = []string{"/pause"}
		cfg.Config.User = "65535:65535"
	})
}

func fileSize(f *os.File) int64 {
	info, err := f.Stat()
	if err != nil {
		return -1
	}
	return info.Size()
}
