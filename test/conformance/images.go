package conformance

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kubeboot/kubeboot/internal/components/containerruntime"
)

// The registries the conformance specs pull from (test/utils/image's
// defaults), under which the images are built: the nodes' registries.yaml
// sends them to the run's registry.
const (
	e2eRegistry = "registry.k8s.io/e2e-test-images"
	k8sRegistry = "registry.k8s.io"
)

// cyclonus's NetworkPolicy cases (cyclonus.go): the module, under this
// one, of their runner and of the worker its Pods run (worker/), and the
// image its Pods run when it probes in batches, as it names it (Docker
// Hub's, which the nodes mirror to the run's registry too).
const (
	CyclonusDir         = "test/conformance/cyclonus"
	cyclonusWorkerImage = "docker.io/mfenwick100/cyclonus-worker:latest"
)

// CyclonusImages are the images cyclonus's cases run: the worker's, and
// the nodes' sandbox image.
var CyclonusImages = []string{cyclonusWorkerImage, containerruntime.DefaultPauseImage}

// The images the Gateway API's conformance suite runs
// (sigs.k8s.io/gateway-api/conformance's base and tests manifests):
// its echo backend, by each tag the manifests name, and CoreDNS.
const (
	echoBasicImage = k8sRegistry + "/gateway-api/echo-basic"
	corednsImage   = k8sRegistry + "/coredns/coredns:v1.12.2"
)

// GatewayAPIImages are the images the Gateway API's conformance suite
// runs, and the nodes' sandbox image.
var GatewayAPIImages = []string{echoBasicImage + ":v1.5.1", echoBasicImage + ":v1.6.0-dev.2", echoBasicImage + ":v1.6.0-dev.3",
	corednsImage, containerruntime.DefaultPauseImage}

// imageRefName is the OCI layout annotation naming an image.
const imageRefName = "org.opencontainers.image.ref.name"

// Images returns the names (as `e2e.test --list-images` prints them) of
// the images BuildImages builds.
func Images() []string {
	var refs []string
	for _, s := range imageSpecs() {
		refs = append(refs, s.refs...)
	}
	sort.Strings(refs)
	return refs
}

// imageSpec is one image the specs run, by every name it goes by.
type imageSpec struct {
	refs  []string
	build func(*builder) (v1.Image, error)
}

// imageSpecs are the images the [Conformance] specs of k8s.io/kubernetes
// v1.37.2 run (test/utils/image/manifest.go), each made of what upstream's
// Dockerfile under test/images puts in it: the module's own Go programs and
// Debian's packages where upstream has Alpine's.
func imageSpecs() []imageSpec {
	agnhost := func(version string) func(*builder) (v1.Image, error) {
		return func(b *builder) (v1.Image, error) { return b.agnhost(version, nil, nil) }
	}
	webserver := func(name string) func(*builder) (v1.Image, error) {
		return func(b *builder) (v1.Image, error) {
			dir := b.kubernetesFile(filepath.Join("test/images", name, "html"))
			jpg, err := os.ReadFile(filepath.Join(dir, name+".jpg"))
			if err != nil {
				return nil, err
			}
			data, err := os.ReadFile(filepath.Join(dir, "data.json"))
			if err != nil {
				return nil, err
			}
			return b.agnhost("1.8", []file{regular(name+".jpg", 0o644, jpg), regular("data.json", 0o644, data)}, []string{"test-webserver"})
		}
	}
	nginx := func(version string) func(*builder) (v1.Image, error) {
		return func(b *builder) (v1.Image, error) { return b.nginx(version) }
	}
	pause := func(version string) func(*builder) (v1.Image, error) {
		return func(b *builder) (v1.Image, error) { return b.pause(version) }
	}
	return []imageSpec{
		{[]string{e2eRegistry + "/agnhost:2.66.1"}, agnhost("2.66.1")},
		{[]string{e2eRegistry + "/agnhost:2.55"}, agnhost("2.55")},
		{[]string{e2eRegistry + "/kitten:1.8"}, webserver("kitten")},
		{[]string{e2eRegistry + "/nautilus:1.8"}, webserver("nautilus")},
		{[]string{e2eRegistry + "/busybox:1.37.0-2"}, (*builder).busybox},
		{[]string{e2eRegistry + "/nginx:1.27.0-2"}, nginx("1.27.0-2")},
		{[]string{e2eRegistry + "/nginx:1.28.0-2"}, nginx("1.28.0-2")},
		{[]string{e2eRegistry + "/nonewprivs:1.4"}, (*builder).nonewprivs},
		{[]string{e2eRegistry + "/nonroot:1.5"}, (*builder).nonroot},
		{[]string{e2eRegistry + "/glibc-dns-testing:2.1.1"}, (*builder).glibcDNSTesting},
		{[]string{e2eRegistry + "/sample-apiserver:1.29.2"}, (*builder).sampleAPIServer},
		{[]string{k8sRegistry + "/etcd:3.7.0-0"}, (*builder).etcd},
		// The specs' pause, and the nodes' sandbox image (kubeboot's
		// default, containerruntime.DefaultPauseImage).
		{[]string{k8sRegistry + "/pause:3.10.2"}, pause("3.10.2")},
		{[]string{k8sRegistry + "/pause:3.10.1"}, pause("3.10.1")},
		// The Pods of cyclonus's NetworkPolicy cases (cyclonus.go).
		{[]string{cyclonusWorkerImage}, (*builder).cyclonusWorker},
		// The Gateway API conformance suite's backends (test/gatewayapi).
		{GatewayAPIImages[:3], (*builder).echoBasic},
		{[]string{corednsImage}, (*builder).coredns},
	}
}

// BuildImages builds the images of Images that refs name (all, if none)
// into an OCI image layout in dir/layout, named by the imageRefName
// annotation, and returns its path. dir keeps what the build fetched and
// compiled (Debian's package lists and packages, Go programs); the module
// at module is this one,
// whose go.mod requires the programs' modules. Debian's packages come
// through apt from the host's sources, the only network it needs; no
// container engine is involved. logf reports each step.
func BuildImages(ctx context.Context, module, dir string, refs []string, logf func(string, ...any)) (string, error) {
	specs := imageSpecs()
	if len(refs) > 0 {
		for _, r := range refs {
			if !slices.Contains(Images(), r) {
				return "", fmt.Errorf("no image is built as %s", r)
			}
		}
		specs = slices.DeleteFunc(specs, func(s imageSpec) bool {
			return !slices.ContainsFunc(s.refs, func(r string) bool { return slices.Contains(refs, r) })
		})
	}
	kubernetes, version, err := kubernetesModule(module)
	if err != nil {
		return "", err
	}
	ldflags := versionLDFlags(version)
	b := &builder{ctx: ctx, module: module, kubernetes: kubernetes, ldflags: ldflags, dir: dir, logf: logf,
		bins: map[string]string{}, layers: map[string]v1.Layer{}, apt: &apt{ctx: ctx, dir: filepath.Join(dir, "apt"), logf: logf}}
	out := filepath.Join(dir, "layout")
	if err := os.RemoveAll(out); err != nil {
		return "", err
	}
	p, err := layout.Write(out, empty.Index)
	if err != nil {
		return "", err
	}
	for _, s := range specs {
		img, err := s.build(b)
		if err != nil {
			return "", fmt.Errorf("image %s: %w", s.refs[0], err)
		}
		for _, ref := range s.refs {
			if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{imageRefName: ref})); err != nil {
				return "", fmt.Errorf("image %s: writing it: %w", ref, err)
			}
		}
		logf("image %s built", strings.Join(s.refs, ", "))
	}
	return out, nil
}

// builder builds the images, sharing their layers.
type builder struct {
	ctx    context.Context
	module string // the kubeboot module's root
	// kubernetes is k8s.io/kubernetes's directory in the module cache.
	kubernetes string
	// ldflags stamp the Go programs with its version.
	ldflags string
	dir     string // the build's directory
	logf    func(string, ...any)
	// bins are the programs built for the images, by name.
	bins map[string]string
	// layers are built once and shared between images.
	layers map[string]v1.Layer
	apt    *apt
}

// goPrograms are the images' Go programs, by name, built from the packages
// this module's go.mod names as tools.
var goPrograms = map[string]string{
	"agnhost":          "k8s.io/kubernetes/test/images/agnhost",
	"nnp":              "k8s.io/kubernetes/test/images/nonewprivs",
	"sample-apiserver": "k8s.io/sample-apiserver",
	"etcd":             "go.etcd.io/etcd/server/v3",
	"echo-basic":       "sigs.k8s.io/gateway-api/conformance/echo-basic",
	"coredns":          "github.com/kubeboot/kubeboot/test/conformance/coredns",
}

// binary returns the program name's contents, built on first use, so a
// build of some of the images builds only their programs: the Go ones
// as the tests build this module's packages (cgo on, so the build cache
// serves them; the images carry Debian's libc), cyclonus's worker from
// its runner's module (CyclonusDir), pause-VERSION, static, from
// upstream's C source with the host's gcc, and ash (buildAsh).
func (b *builder) binary(name string) ([]byte, error) {
	if path, ok := b.bins[name]; ok {
		return os.ReadFile(path)
	}
	bin := filepath.Join(b.dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return nil, err
	}
	out := filepath.Join(bin, name)
	var err error
	switch version, pause := strings.CutPrefix(name, "pause-"); {
	case goPrograms[name] != "":
		cmd := exec.CommandContext(b.ctx, "go", "build", "-ldflags=-s -w "+b.ldflags, "-o", out, goPrograms[name])
		cmd.Dir = b.module
		err = run(cmd)
	case name == "cyclonus-worker":
		cmd := exec.CommandContext(b.ctx, "go", "build", "-ldflags=-s -w", "-o", out, "./worker")
		cmd.Dir = filepath.Join(b.module, CyclonusDir)
		err = run(cmd)
	case pause:
		err = run(exec.CommandContext(b.ctx, "gcc", "-Os", "-Wall", "-Werror", "-static", "-DVERSION=v"+version, "-o", out,
			b.kubernetesFile("build/pause/linux/pause.c")))
	case name == "ash":
		out, err = b.buildAsh()
	default:
		return nil, fmt.Errorf("no program %s", name)
	}
	if err != nil {
		return nil, fmt.Errorf("building %s: %w", name, err)
	}
	b.bins[name] = out
	b.logf("program %s built", name)
	return os.ReadFile(out)
}

// ashOptions are the busybox configuration of the images' sh: from
// allnoconfig, upstream's ash with the builtins and features of its
// default configuration that scripts use, static.
var ashOptions = []string{"STATIC", "SH_IS_ASH", "ASH", "ASH_OPTIMIZE_FOR_SIZE", "ASH_INTERNAL_GLOB", "ASH_BASH_COMPAT",
	"ASH_JOB_CONTROL", "ASH_ALIAS", "ASH_RANDOM_SUPPORT", "ASH_EXPAND_PRMT", "ASH_ECHO", "ASH_PRINTF", "ASH_TEST",
	"ASH_GETOPTS", "ASH_CMDCMD", "FEATURE_SH_MATH", "FEATURE_SH_MATH_64", "FEATURE_SH_READ_FRAC"}

// buildAsh builds busybox's ash alone from upstream's source, the
// upstream tarball of Debian's busybox source package without Debian's
// changes (see shell), static, and returns its path.
func (b *builder) buildAsh() (string, error) {
	tarball, err := b.apt.source("busybox")
	if err != nil {
		return "", err
	}
	src := filepath.Join(b.dir, "busybox-src")
	if err := os.RemoveAll(src); err != nil {
		return "", err
	}
	top, err := untar(tarball, src)
	if err != nil {
		return "", fmt.Errorf("unpacking %s: %w", filepath.Base(tarball), err)
	}
	dir := filepath.Join(src, top)
	runMake := func(stdin string, args ...string) error {
		cmd := exec.CommandContext(b.ctx, "make", args...)
		cmd.Dir, cmd.Stdin = dir, strings.NewReader(stdin)
		return run(cmd)
	}
	if err := runMake("", "allnoconfig"); err != nil {
		return "", err
	}
	config, err := os.ReadFile(filepath.Join(dir, ".config"))
	if err != nil {
		return "", err
	}
	text := string(config)
	for _, o := range ashOptions {
		text = strings.Replace(text, "# CONFIG_"+o+" is not set\n", "CONFIG_"+o+"=y\n", 1)
	}
	if err := os.WriteFile(filepath.Join(dir, ".config"), []byte(text), 0o644); err != nil {
		return "", err
	}
	// oldconfig asks about the options the ones set open up: their
	// defaults (an empty answer each).
	if err := runMake(strings.Repeat("\n", 1000), "oldconfig"); err != nil {
		return "", err
	}
	if err := runMake("", "-j"+strconv.Itoa(runtime.NumCPU()), "busybox"); err != nil {
		return "", err
	}
	out := filepath.Join(b.dir, "bin", "ash")
	if err := os.Rename(filepath.Join(dir, "busybox"), out); err != nil {
		return "", err
	}
	return out, os.RemoveAll(src)
}

// kubernetesFile is the path of a file of the k8s.io/kubernetes module the
// build uses, in the module cache.
func (b *builder) kubernetesFile(rel string) string {
	return filepath.Join(b.kubernetes, rel)
}

// agnhost is upstream's agnhost image (test/images/agnhost/Dockerfile):
// the agnhost binary at / (and /agnhost-2 linked to it), porter's
// certificate and key, /uploads, the users the security-context specs
// expect, on a root filesystem with the tools the specs call (dig, curl,
// OpenBSD's nc, ss, getent, bash, socat, iperf, ipcs, busybox's ash as
// sh and its applets for the rest), plus extra files, with cmd replacing
// its CMD.
func (b *builder) agnhost(version string, extra []file, cmd []string) (v1.Image, error) {
	base, err := b.debianLayer("agnhost-base", []string{"bind9-dnsutils", "curl", "netcat-openbsd", "iproute2", "bash", "socat", "iperf", "util-linux", "libc-bin"}, appletsAsListed)
	if err != nil {
		return nil, err
	}
	own, err := b.cachedLayer("agnhost", func() ([]file, error) {
		agnhost, err := b.binary("agnhost")
		if err != nil {
			return nil, err
		}
		ash, err := b.binary("ash")
		if err != nil {
			return nil, err
		}
		var files []file
		for _, f := range []string{"localhost.crt", "localhost.key"} {
			data, err := os.ReadFile(b.kubernetesFile("test/images/agnhost/porter/" + f))
			if err != nil {
				return nil, err
			}
			files = append(files, regular(f, 0o644, data))
		}
		return append(files,
			regular("agnhost", 0o755, agnhost),
			symlink("agnhost-2", "agnhost"),
			// OpenBSD's, as Alpine's netcat-openbsd makes it; Debian
			// links it by alternatives, which nothing runs here.
			symlink("usr/bin/nc", "nc.openbsd"),
			regular("usr/bin/sh", 0o755, ash), // see shell
			symlink("usr/local/bin/iperf", "/usr/bin/iperf"),
			dir("uploads", 0o755),
			dir("home/user-defined-in-image", 0o755),
			regular("etc/passwd", 0o644, []byte(passwd+"user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n")),
			regular("etc/group", 0o644, []byte(group+"user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n")),
		), nil
	})
	if err != nil {
		return nil, err
	}
	layers := []v1.Layer{base, own}
	if len(extra) > 0 {
		l, err := filesLayer(extra)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	if cmd == nil {
		cmd = []string{"pause"}
	}
	return image(layers, imageConfig{version: version, entrypoint: []string{"/agnhost"}, cmd: cmd,
		ports: []string{"80", "8080", "8081", "9376", "5000"}})
}

// cyclonusWorker is cyclonus's worker image (its cmd/worker/Dockerfile):
// agnhost with the worker at /worker, its entrypoint. The cases' Pods
// serve with its agnhost, and each probe runs the worker in the source
// Pod, which runs `agnhost connect` for every target.
func (b *builder) cyclonusWorker() (v1.Image, error) {
	worker, err := b.binary("cyclonus-worker")
	if err != nil {
		return nil, err
	}
	img, err := b.agnhost("2.66.1", []file{regular("worker", 0o755, worker)}, nil)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	c := cfg.Config
	c.Entrypoint, c.Cmd = []string{"/worker"}, nil
	return mutate.Config(img, c)
}

// busybox is upstream's busybox image: Debian's static busybox with its
// applets linked, upstream's ash as sh (see shell).
func (b *builder) busybox() (v1.Image, error) {
	l, err := b.busyboxLayer()
	if err != nil {
		return nil, err
	}
	return image([]v1.Layer{l}, imageConfig{version: "1.37.0-2", cmd: []string{"sh"}})
}

// nonroot is upstream's nonroot image: busybox run as user 1234.
func (b *builder) nonroot() (v1.Image, error) {
	l, err := b.busyboxLayer()
	if err != nil {
		return nil, err
	}
	return image([]v1.Layer{l}, imageConfig{version: "1.5", cmd: []string{"sh"}, user: "1234"})
}

// nonewprivs is upstream's nonewprivs image: nnp, setuid root, on the
// busybox layer.
func (b *builder) nonewprivs() (v1.Image, error) {
	base, err := b.busyboxLayer()
	if err != nil {
		return nil, err
	}
	nnp, err := b.binary("nnp")
	if err != nil {
		return nil, err
	}
	l, err := filesLayer([]file{regular("usr/local/bin/nnp", 0o4755, nnp)})
	if err != nil {
		return nil, err
	}
	return image([]v1.Layer{base, l}, imageConfig{version: "1.4", cmd: []string{"nnp"}})
}

// nginx is upstream's nginx image, on Debian's nginx: it serves a welcome
// page on port 80 in the foreground.
func (b *builder) nginx(version string) (v1.Image, error) {
	base, err := b.debianLayer("nginx-base", []string{"nginx"}, appletsAsListed)
	if err != nil {
		return nil, err
	}
	own, err := b.cachedLayer("nginx", func() ([]file, error) {
		return []file{
			regular("etc/nginx/nginx.conf", 0o644, []byte(nginxConf)),
			regular("usr/share/nginx/html/index.html", 0o644, []byte(nginxIndex)),
			dir("var/lib/nginx", 0o755), dir("var/log/nginx", 0o755), dir("run", 0o755),
			regular("etc/passwd", 0o644, []byte(passwd+"www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin\n")),
			regular("etc/group", 0o644, []byte(group+"www-data:x:33:\n")),
		}, nil
	})
	if err != nil {
		return nil, err
	}
	return image([]v1.Layer{base, own}, imageConfig{version: version, cmd: []string{"nginx", "-g", "daemon off;"},
		ports: []string{"80"}, stopSignal: "SIGQUIT"})
}

// glibcDNSTesting is upstream's glibc-dns-testing: Debian with dig, its
// resolver being glibc's.
func (b *builder) glibcDNSTesting() (v1.Image, error) {
	base, err := b.debianLayer("glibc-dns-testing", []string{"bind9-dnsutils", "libc-bin", "dash", "bash", "coreutils", "grep", "sed", "hostname"}, noApplets)
	if err != nil {
		return nil, err
	}
	own, err := filesLayer([]file{symlink("usr/bin/sh", "dash")})
	if err != nil {
		return nil, err
	}
	return image([]v1.Layer{base, own}, imageConfig{version: "2.1.1", cmd: []string{"bash"}})
}

// sampleAPIServer is upstream's sample-apiserver image: k8s.io/sample-apiserver
// at the API version kubeboot serves.
func (b *builder) sampleAPIServer() (v1.Image, error) {
	return b.program("sample-apiserver", "/sample-apiserver", "1.29.2", []string{"/sample-apiserver"}, nil)
}

// etcd is upstream's etcd image: etcd at /usr/local/bin, its version the
// one kubeboot embeds.
func (b *builder) etcd() (v1.Image, error) {
	return b.program("etcd", "/usr/local/bin/etcd", "3.7.0-0", nil, []string{"/usr/local/bin/etcd"})
}

// echoBasic is the Gateway API conformance suite's echo backend: its
// echo-basic program, the image's entrypoint.
func (b *builder) echoBasic() (v1.Image, error) {
	return b.program("echo-basic", "/echo-basic", "v1.5.1", []string{"/echo-basic"}, nil)
}

// coredns is CoreDNS with the plugins the suite's Corefile names, at
// /coredns, the image's entrypoint (upstream's).
func (b *builder) coredns() (v1.Image, error) {
	return b.program("coredns", "/coredns", "v1.12.2", []string{"/coredns"}, nil)
}

// pause is upstream's pause image: pause.c, static, alone, run as 65535.
func (b *builder) pause(version string) (v1.Image, error) {
	data, err := b.binary("pause-" + version)
	if err != nil {
		return nil, err
	}
	l, err := filesLayer([]file{regular("pause", 0o755, data)})
	if err != nil {
		return nil, err
	}
	return image([]v1.Layer{l}, imageConfig{version: version, entrypoint: []string{"/pause"}, user: "65535:65535"})
}

// program is an image of one of the builder's Go programs at path, on
// the busybox layer (libc, and a shell to exec into).
func (b *builder) program(name, path, version string, entrypoint, cmd []string) (v1.Image, error) {
	base, err := b.busyboxLayer()
	if err != nil {
		return nil, err
	}
	data, err := b.binary(name)
	if err != nil {
		return nil, err
	}
	l, err := filesLayer([]file{regular(strings.TrimPrefix(path, "/"), 0o755, data)})
	if err != nil {
		return nil, err
	}
	return image([]v1.Layer{base, l}, imageConfig{version: version, entrypoint: entrypoint, cmd: cmd})
}

// busyboxLayer is Debian's static busybox at /bin/busybox, its applets
// linked in /bin, upstream's ash as sh (see shell), with Debian's libc
// (for the Go programs, built with cgo) and the base files.
func (b *builder) busyboxLayer() (v1.Layer, error) {
	return b.cachedLayer("busybox", func() ([]file, error) {
		fs, err := b.debianFiles([]string{"libc6"}, appletsInBin)
		if err != nil {
			return nil, err
		}
		ash, err := b.binary("ash")
		if err != nil {
			return nil, err
		}
		return append(fs.files(), regular("usr/bin/sh", 0o755, ash),
			regular("etc/passwd", 0o644, []byte(passwd)), regular("etc/group", 0o644, []byte(group)),
			dir("tmp", 0o1777)), nil
	})
}

// shell: the images upstream bases on busybox or Alpine have busybox's
// ash as /bin/sh, and specs depend on how it behaves: it passes on
// environment variables whose names are not shell identifiers ("data-1",
// which the kubelet passes since relaxed environment variable names), and
// its error messages are compared word for word ("can't create /file:
// Read-only file system"). Debian patches its busybox's ash to drop such
// variables (as dash does), and its busybox runs its applets in
// preference to the PATH's commands (`sh -c "nc ..."` would not run
// OpenBSD's nc). So sh is busybox's ash built alone from upstream's
// source (buildAsh), and Debian's busybox gives the other applets.

// debianLayer is the files of Debian's packages pkgs and everything they
// depend on, with busybox's applets for the commands they lack placed as
// a says, and the base accounts, cached by key.
func (b *builder) debianLayer(key string, pkgs []string, a applets) (v1.Layer, error) {
	return b.cachedLayer(key, func() ([]file, error) {
		fs, err := b.debianFiles(pkgs, a)
		if err != nil {
			return nil, err
		}
		return append(fs.files(), regular("etc/nsswitch.conf", 0o644, []byte("passwd: files\ngroup: files\nhosts: files dns\n")),
			regular("etc/passwd", 0o644, []byte(passwd)), regular("etc/group", 0o644, []byte(group)),
			dir("tmp", 0o1777)), nil
	})
}

// cachedLayer is the layer of the files files returns, made once per key.
func (b *builder) cachedLayer(key string, files func() ([]file, error)) (v1.Layer, error) {
	if l, ok := b.layers[key]; ok {
		return l, nil
	}
	fs, err := files()
	if err != nil {
		return nil, err
	}
	l, err := filesLayer(fs)
	if err != nil {
		return nil, err
	}
	b.layers[key] = l
	return l, nil
}

// imageConfig is what an image's configuration says besides its layers.
type imageConfig struct {
	version         string
	entrypoint, cmd []string
	user            string
	ports           []string
	stopSignal      string
}

// image is layers with cfg, for linux/amd64.
func image(layers []v1.Layer, cfg imageConfig) (v1.Image, error) {
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, err
	}
	c, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	c = c.DeepCopy()
	c.OS, c.Architecture = "linux", "amd64"
	c.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	c.Config.Entrypoint, c.Config.Cmd, c.Config.User = cfg.entrypoint, cfg.cmd, cfg.user
	c.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	c.Config.StopSignal = cfg.stopSignal
	if len(cfg.ports) > 0 {
		c.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range cfg.ports {
			c.Config.ExposedPorts[p+"/tcp"] = struct{}{}
		}
	}
	// Images built alike differ by version, as upstream's do.
	c.Config.Labels = map[string]string{"org.opencontainers.image.version": cfg.version,
		"org.opencontainers.image.vendor": "kubeboot conformance build"}
	return mutate.ConfigFile(img, c)
}

// The base accounts of every image.
const (
	passwd = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	group  = "root:x:0:\nnogroup:x:65534:\n"
)

const nginxConf = `user www-data;
worker_processes 1;
pid /run/nginx.pid;
error_log stderr notice;
events {
	worker_connections 1024;
}
http {
	include /etc/nginx/mime.types;
	default_type application/octet-stream;
	access_log /dev/stdout;
	server {
		listen 80 default_server;
		root /usr/share/nginx/html;
		index index.html;
	}
}
`

const nginxIndex = `<!DOCTYPE html>
<html>
<head><title>Welcome to nginx!</title></head>
<body><h1>Welcome to nginx!</h1></body>
</html>
`

// file is one entry of a layer.
type file struct {
	hdr  tar.Header
	data []byte
}

func regular(name string, mode int64, data []byte) file {
	return file{hdr: tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(data))}, data: data}
}

func symlink(name, target string) file {
	return file{hdr: tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}}
}

func dir(name string, mode int64) file {
	return file{hdr: tar.Header{Name: name + "/", Typeflag: tar.TypeDir, Mode: mode}}
}

// filesLayer is a layer of files, with the directories above them, in a
// stable order and with fixed times, so that a rebuild is the same blob.
func filesLayer(files []file) (v1.Layer, error) {
	byName := map[string]file{}
	for _, f := range files {
		name := strings.TrimSuffix(f.hdr.Name, "/")
		for parent := filepath.Dir(name); parent != "."; parent = filepath.Dir(parent) {
			if _, ok := byName[parent]; !ok {
				byName[parent] = dir(parent, 0o755)
			}
		}
		byName[name] = f
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		f := byName[name]
		h := f.hdr
		h.Name = name
		if h.Typeflag == tar.TypeDir {
			h.Name += "/"
		}
		h.ModTime, h.AccessTime, h.ChangeTime = time.Unix(0, 0), time.Time{}, time.Time{}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
}

// run runs cmd, its output in the error.
func run(cmd *exec.Cmd) error {
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return nil
}

// kubernetesModule is the k8s.io/kubernetes module the module at module
// requires: its directory in the module cache and its version.
func kubernetesModule(module string) (dir, version string, err error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", "k8s.io/kubernetes")
	cmd.Dir = module
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("finding k8s.io/kubernetes in the module cache (go list -m): %w", err)
	}
	dir, version, _ = strings.Cut(strings.TrimSpace(string(out)), " ")
	return dir, version, nil
}

// VersionLDFlags are the linker flags that stamp a program built from the
// module at module with k8s.io/kubernetes's version, as upstream's builds
// do (hack/lib/version.sh): e2e.test reads it to pick the Pod Security
// level's fixtures, the programs report it.
func VersionLDFlags(module string) (string, error) {
	_, version, err := kubernetesModule(module)
	if err != nil {
		return "", err
	}
	return versionLDFlags(version), nil
}

// versionLDFlags stamp version (v1.37.2) into component-base's version.
func versionLDFlags(version string) string {
	major, rest, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	minor, _, _ := strings.Cut(rest, ".")
	const pkg = "k8s.io/component-base/version."
	return fmt.Sprintf("-X %sgitVersion=%s -X %sgitMajor=%s -X %sgitMinor=%s -X %sgitTreeState=clean",
		pkg, version, pkg, major, pkg, minor, pkg)
}
