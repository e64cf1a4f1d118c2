// Command image builds kubeboot's OCI image without a container daemon
// (go-containerregistry): one layer holding the binary as /bin/kubeboot
// and /bin/kubectl linked to it, run as `kubeboot server`, written as an
// image archive that `docker load`, `podman load` and `ctr images import`
// take.
//
//	go run ./hack/image -bin _output/release/kubeboot-linux-amd64 -platform linux/amd64 -o kubeboot-image.tar
package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/kubeboot/kubeboot/hack/internal/imagebuild"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
)

// dataDir is the default data dir of a root kubeboot, a volume.
const dataDir = "/var/lib/kubeboot"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	bin := fs.String("bin", "", "the kubeboot binary to put in the image (a release build for -platform)")
	platform := fs.String("platform", "linux/amd64", "the image's os/arch, the binary's")
	out := fs.String("o", "kubeboot-image.tar", "where to write the image archive")
	tag := fs.String("tag", "", "the image's name in the archive (default kubeboot:<version>)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *bin == "" {
		return errors.New("-bin: the kubeboot binary is required")
	}
	goos, arch, ok := strings.Cut(*platform, "/")
	if !ok || goos != "linux" {
		return fmt.Errorf("-platform %q: the image is for linux/<arch>", *platform)
	}
	binary, err := readFile(*bin)
	if err != nil {
		return fmt.Errorf("-bin: %w", err)
	}
	version, commit := versionOf(*bin)
	if *tag == "" {
		*tag = "kubeboot:" + version
	}
	ref, err := name.NewTag(*tag)
	if err != nil {
		return fmt.Errorf("-tag %q: %w", *tag, err)
	}
	img, err := build(binary, arch, version, commit)
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(*out, ref, img); err != nil {
		return fmt.Errorf("-o %s: %w", *out, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s: %s %s\n", *out, ref, digest)
	return nil
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// versionOf is the binary's kubeboot version and commit, from `kubeboot
// version -o json` when the binary runs here (its gitVersion is
// v<kubernetes>+kubeboot.<version>), else "unknown".
func versionOf(bin string) (version, commit string) {
	version, commit = "unknown", "unknown"
	out, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		return version, commit
	}
	var info apimachineryversion.Info
	if json.Unmarshal(out, &info) != nil {
		return version, commit
	}
	if _, v, ok := strings.Cut(info.GitVersion, "+kubeboot."); ok {
		version = v
	}
	if info.GitCommit != "" {
		commit = info.GitCommit
	}
	return version, commit
}

// build is the image: the layer and its configuration.
func build(binary []byte, arch, version, commit string) (v1.Image, error) {
	layerTar, err := rootFS(binary)
	if err != nil {
		return nil, err
	}
	return imagebuild.OneLayer(layerTar, arch, func(cfg *v1.ConfigFile) {
		cfg.Config.Entrypoint = []string{"/bin/kubeboot"}
		cfg.Config.Cmd = []string{"server"}
		cfg.Config.Env = []string{"PATH=/bin"}
		cfg.Config.ExposedPorts = map[string]struct{}{"6443/tcp": {}}
		cfg.Config.Volumes = map[string]struct{}{dataDir: {}}
		cfg.Config.Labels = map[string]string{
			"org.opencontainers.image.title":    "kubeboot",
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.revision": commit,
			"org.opencontainers.image.source":   "https://github.com/kubeboot/kubeboot",
		}
	})
}

// rootFS is the layer: /bin/kubeboot, /bin/kubectl linked to it, /tmp and
// the data dir.
func rootFS(binary []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	entries := []*tar.Header{
		{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch},
		{Name: "bin/kubeboot", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(binary)), ModTime: epoch},
		{Name: "bin/kubectl", Typeflag: tar.TypeSymlink, Linkname: "kubeboot", Mode: 0o777, ModTime: epoch},
		{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777, ModTime: epoch},
		{Name: "var/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch},
		{Name: "var/lib/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch},
		{Name: strings.TrimPrefix(dataDir, "/") + "/", Typeflag: tar.TypeDir, Mode: 0o700, ModTime: epoch},
	}
	for _, h := range entries {
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Name == "bin/kubeboot" {
			if _, err := tw.Write(binary); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
