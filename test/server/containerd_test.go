package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/internal/components/containerruntime"
	"github.com/kubeboot/kubeboot/internal/components/containerruntime/embedded"
	"github.com/kubeboot/kubeboot/internal/components/localstorage"
	"github.com/kubeboot/kubeboot/test/harness"
)

// TestServerNodeContainerd runs `kubeboot server --node` with its kubelet on
// containerd and runc, in a private network and mount namespace: real
// containers, from images made on the machine (harness.EmbeddedContainerd), on
// kubeboot's pod network (flannel, the CNI bridge). It checks that a Pod's container runs and answers on the
// Pod's IP, that `kubectl logs` and `kubectl exec` reach it through the
// apiserver and the kubelet, that a ClusterIP Service reaches it through
// kube-proxy, that a claim gets a volume in the node's local storage whose
// data outlives the Pod, that a Pod's service account token still authenticates it
// minutes after it started, and that a deleted Pod's container stops. Its
// Pods' sandboxes are kubeboot's default pause image, which the binary
// carries: the node has no registry for it.
func TestServerNodeContainerd(t *testing.T) {
	harness.RequireContainerd(t)
	addr, ok := inProxyNetNS(t)
	if !ok {
		return
	}
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	registry := harness.StartRegistry(t, addr)
	dataDir := filepath.Join(t.TempDir(), "data")
	nodeDir := harness.NodeDir(dataDir)
	// No --pause-image: the sandbox image is kubeboot's default, which no
	// registry here serves and no tarball holds; the binary carries it.
	harness.EmbeddedContainerd(t, nodeDir)
	args := nodeServerArgs(t, addr, "")
	// An air-gap tarball that is no image archive: named and skipped.
	if err := os.WriteFile(filepath.Join(nodeDir, "images", "corrupt.tar"), []byte("not an image archive"), 0o600); err != nil {
		t.Fatal(err)
	}
	args = append(args, "--private-registry="+writeRegistries(t, registry))
	srv := harness.StartReadyServer(t, 2*time.Minute, bin, dataDir, args...)
	client := srv.MustClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	node := waitNode(ctx, t, client, nodeName)
	if got := node.Status.NodeInfo.ContainerRuntimeVersion; !strings.HasPrefix(got, "containerd://") {
		t.Errorf("container runtime %q, want containerd", got)
	}
	// Started first, checked last: its token must outlive the JWT
	// library's one-minute leeway.
	runPod(ctx, t, client, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "whoami", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "whoami", Image: harness.TestImage, ImagePullPolicy: corev1.PullNever,
			Args: []string{"whoami", whoamiPeriod.String()},
		}}},
	})

	const port = 8080
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: metav1.NamespaceDefault, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "web", Image: harness.TestImage, ImagePullPolicy: corev1.PullNever,
			Args:  []string{"serve", "8080"},
			Ports: []corev1.ContainerPort{{ContainerPort: port}},
			// Ready only once the kubelet's probe reaches the container.
			ReadinessProbe: &corev1.Probe{PeriodSeconds: 1,
				ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}}},
		}}},
	}
	last := runPod(ctx, t, client, pod)
	// The container's hostname is the Pod's name.
	const hello = "hello from web"

	t.Run("the Pod is on the node's pod network", func(t *testing.T) {
		node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !podNetworkUp(node) {
			t.Errorf("node %s: conditions %v; want NetworkUnavailable False, reason FlannelIsUp", nodeName, node.Status.Conditions)
		}
		cidr, err := netip.ParsePrefix(node.Spec.PodCIDR)
		if ip, perr := netip.ParseAddr(last.Status.PodIP); err != nil || perr != nil || !cidr.Contains(ip) {
			t.Errorf("Pod IP %s not in node %s's pod CIDR %q", last.Status.PodIP, nodeName, node.Spec.PodCIDR)
		}
	})

	t.Run("the container answers on the Pod's IP", func(t *testing.T) {
		if got, err := dialHello(net.JoinHostPort(last.Status.PodIP, "8080")); got != hello {
			t.Errorf("Pod IP %s answered %q (%v), want %q", last.Status.PodIP, got, err, hello)
		}
	})

	t.Run("kubectl logs", func(t *testing.T) {
		if out := srv.Kubectl(t, "logs", "web"); out != "serving on :8080\n" {
			t.Errorf("kubectl logs web: %q, want the container's one line", out)
		}
	})

	t.Run("kubectl exec", func(t *testing.T) {
		if out := srv.Kubectl(t, "exec", "web", "--", harness.TestImageCommand, "echo", "hi", "from", "exec"); out != "hi from exec\n" {
			t.Errorf("kubectl exec web: %q, want %q", out, "hi from exec\n")
		}
	})

	t.Run("a ClusterIP reaches the Pod", func(t *testing.T) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: metav1.NamespaceDefault},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(port)}}},
		}
		svc, err := client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitHello(t, net.JoinHostPort(svc.Spec.ClusterIP, "80"), hello)
	})

	t.Run("the Pods run on containerd's own shim", func(t *testing.T) {
		// The tests' kubeboot embeds it, as a release does (harness.Build):
		// each Pod's shim runs that program, not kubeboot through a link.
		shim := filepath.Join(nodeDir, "bin", embedded.ShimName)
		if n := processesOf(t, shim); n < 2 {
			t.Errorf("%d processes run %s, want a shim for each of the 2 Pods", n, shim)
		}
	})

	t.Run("a corrupt air-gap tarball is named and skipped", func(t *testing.T) {
		if logs := srv.Logs(); !strings.Contains(logs, "Skipping an air-gap image tarball") || !strings.Contains(logs, "corrupt.tar") {
			t.Errorf("the server's log does not name corrupt.tar as skipped")
		}
	})

	t.Run("kubeboot ctr lists the node's images, in the CRI's namespace by default", func(t *testing.T) {
		out, err := exec.Command(bin, "ctr", "--address", filepath.Join(nodeDir, "containerd", "containerd.sock"), "images", "ls", "-q").Output()
		if err != nil {
			t.Fatalf("kubeboot ctr images ls: %v", err)
		}
		if images := strings.Fields(string(out)); !slices.Contains(images, harness.TestImage) || !slices.Contains(images, containerruntime.DefaultPauseImage) {
			t.Errorf("kubeboot ctr images ls: %q, want %s (a tarball's) and %s (the binary's) among them", images, harness.TestImage, containerruntime.DefaultPauseImage)
		}
	})

	t.Run("an image volume", func(t *testing.T) {
		runPod(ctx, t, client, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "imagevolume", Namespace: metav1.NamespaceDefault},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: harness.TestImage, ImagePullPolicy: corev1.PullNever,
					Args: []string{"pause"}, VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					Image: &corev1.ImageVolumeSource{Reference: harness.DataImage, PullPolicy: corev1.PullNever}}}},
			},
		})
		if out := srv.Kubectl(t, "exec", "imagevolume", "--", harness.TestImageCommand, "cat", "/data"+harness.DataImageFile); out != harness.DataImageMessage {
			t.Errorf("the image volume's %s reads %q, want %q", harness.DataImageFile, out, harness.DataImageMessage)
		}
		deletePod(ctx, t, client, metav1.NamespaceDefault, "imagevolume")
	})

	t.Run("a Pod pulls through registries.yaml's mirror, with auth and TLS", func(t *testing.T) {
		// The pause image, whose ID no Pod's container uses otherwise: the
		// kubelet checks the credentials of Pods using an image it pulled
		// (by ID), and refuses those with pull policy Never.
		registry.Push(t, harness.ImageArchive(nodeDir, harness.PauseImage), "kubeboot/pause:1")
		// mirror.test resolves nowhere: only the mirror has the image,
		// after an endpoint that refuses connections.
		runPod(ctx, t, client, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "mirrored", Namespace: metav1.NamespaceDefault},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: mirroredImage,
				ImagePullPolicy: corev1.PullAlways}}},
		})
		deletePod(ctx, t, client, metav1.NamespaceDefault, "mirrored")
		for name, logs := range map[string]string{"the server's": srv.Logs(), "containerd's": readFile(t, filepath.Join(nodeDir, "containerd", "containerd.log"))} {
			if strings.Contains(logs, registry.Password) {
				t.Errorf("%s log holds the registry's password", name)
			}
		}
		if fi, err := os.Stat(filepath.Join(nodeDir, "containerd", "config.toml")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("containerd's configuration, with the registry's password: %v, %v; want mode 0600", fi.Mode(), err)
		}
	})

	t.Run("a Pod pulls through a mirror that renames repositories", func(t *testing.T) {
		// An image no other Pod uses (see above), only on the registry,
		// as renamed/app: rewrite.test resolves nowhere.
		images := t.TempDir()
		harness.WriteTestImage(t, images, "kubeboot.test/renamed:1", map[string][]byte{"/renamed": []byte("renamed")})
		registry.Push(t, harness.ImageArchive(images, "kubeboot.test/renamed:1"), "renamed/app:1")
		pod := runPod(ctx, t, client, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "rewritten", Namespace: metav1.NamespaceDefault},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "rewrite.test/kubeboot/app:1",
				ImagePullPolicy: corev1.PullAlways, Args: []string{"pause"}}}},
		})
		deletePod(ctx, t, client, metav1.NamespaceDefault, pod.Name)
		if got := pod.Status.ContainerStatuses[0].Image; got != "rewrite.test/kubeboot/app:1" {
			t.Errorf("the container's image %q, want the Pod's name for it", got)
		}
	})

	t.Run("containerd killed is restarted, its containers kept", func(t *testing.T) {
		config := filepath.Join(nodeDir, "containerd", "config.toml")
		before := containerdPID(config)
		container := containerPID("serve")
		if before == 0 || container == 0 {
			t.Fatalf("containerd %d, the web container %d: want both running", before, container)
		}
		if err := syscall.Kill(before, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		var after int
		if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
			after = containerdPID(config)
			return after != 0 && after != before, nil
		}); err != nil {
			t.Fatalf("containerd was not restarted: %v", err)
		}
		if got := containerPID("serve"); got != container {
			t.Errorf("the web container's process is %d after containerd's restart, want %d, the same", got, container)
		}
		// The kubelet reaches its runtime again.
		checkWebKept(ctx, t, srv, client, "containerd's restart")
	})

	// The restarted server is the test's, not the subtest's.
	parent := t
	// While the server restarts, the Pods' requests to the API server go
	// unanswered: it takes its endpoint out of the kubernetes Service as it
	// stops, and its kube-proxy programs the endpoint again only once its
	// informers have synced after the start.
	var serverBack time.Time
	t.Run("a restarted node keeps its Pods running", func(t *testing.T) {
		container := containerPID("serve")
		if err := srv.Terminate(time.Minute); err != nil {
			t.Fatalf("stopping the server: %v", err)
		}
		// It gets SIGTERM with the node, and with the process at the
		// latest (Pdeathsig).
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
			return containerdPID(filepath.Join(nodeDir, "containerd", "config.toml")) == 0, nil
		}); err != nil {
			t.Errorf("containerd outlived the server: %v", err)
		}
		if got := containerPID("serve"); got != container || got == 0 {
			t.Errorf("the web container's process is %d while the server is down, want %d, the same", got, container)
		}
		srv = harness.StartReadyServer(parent, 2*time.Minute, bin, dataDir, args...)
		client = srv.MustClient(parent)
		waitNode(ctx, t, client, nodeName)
		checkWebKept(ctx, t, srv, client, "the server's restart")
		serverBack = time.Now()
		if got := containerPID("serve"); got != container {
			t.Errorf("the web container's process is %d after the server's restart, want %d, the same", got, container)
		}
	})

	t.Run("a claim's data outlives its Pod and goes with the claim", func(t *testing.T) {
		checkLocalVolume(ctx, t, srv, client, filepath.Join(srv.DataDir, "node", localstorage.DirName))
	})

	t.Run("a Pod's token still works after two minutes", func(t *testing.T) {
		checkTokenLasts(ctx, t, client, metav1.NamespaceDefault, "whoami", 130*time.Second, serverBack)
		deletePod(ctx, t, client, metav1.NamespaceDefault, "whoami")
	})

	t.Run("a deleted Pod's container stops", func(t *testing.T) {
		deletePod(ctx, t, client, metav1.NamespaceDefault, "web")
		for pid, p := range harness.Processes() {
			if len(p.Args) > 1 && p.Args[0] == harness.TestImageCommand && p.Args[1] == "serve" {
				t.Errorf("the Pod's container (process %d, %v) still runs after the Pod is gone", pid, p.Args)
			}
		}
	})
}

// whoamiPeriod is how often the whoami Pod asks the API server who it is.
const whoamiPeriod = 10 * time.Second

// checkTokenLasts reads the log of Pod ns/name, which runs `testcontainer
// whoami` (a SelfSubjectReview with its projected service account token
// every few seconds), until it covers at least after since the Pod
// started, and requires every review to have authenticated the Pod's
// service account, except those left unanswered (status 0) while the API
// server restarted: until serverBack (zero: never) and one whoami period
// more, for the kube-proxy's first sync. The kubelet asks for
// 3607 s tokens and renews them at 80% of their life
// (--service-account-extend-token-expiration is false).
func checkTokenLasts(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, name string, after time.Duration, serverBack time.Time) {
	t.Helper()
	want := fmt.Sprintf("201 system:serviceaccount:%s:default", ns)
	// The log counts seconds from the container's start, which its status
	// gives to the second: one more second covers the rounding.
	var downFor time.Duration
	if !serverBack.IsZero() {
		pod, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(pod.Status.ContainerStatuses) == 0 || pod.Status.ContainerStatuses[0].State.Running == nil {
			t.Fatalf("Pod %s/%s's container is not running: %+v", ns, name, pod.Status.ContainerStatuses)
		}
		downFor = serverBack.Sub(pod.Status.ContainerStatuses[0].State.Running.StartedAt.Time) + whoamiPeriod + time.Second
	}
	var lines []string
	err := wait.PollUntilContextCancel(ctx, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		out, err := client.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return false, nil
		}
		lines = strings.Split(strings.TrimSpace(string(out)), "\n")
		var seconds int
		fmt.Sscan(lines[len(lines)-1], &seconds)
		return time.Duration(seconds)*time.Second >= after, nil
	})
	if err != nil {
		t.Fatalf("the Pod's log does not reach %s: %v\n%s", after, err, strings.Join(lines, "\n"))
	}
	for _, l := range lines {
		var seconds, status int
		fmt.Sscan(l, &seconds, &status)
		if status == 0 && time.Duration(seconds)*time.Second <= downFor {
			continue
		}
		if _, result, _ := strings.Cut(l, " "); result != want {
			t.Errorf("review at %s, want %q (the API server was back %s after the Pod started); the whole log:\n%s",
				l, want, downFor.Round(time.Second), strings.Join(lines, "\n"))
			break
		}
	}
}

// checkLocalVolume runs a Pod with a claim of the default class, writes in
// its volume, runs another Pod on the same claim and reads it back, then
// deletes the claim and checks that its directory under root, the
// node's storage path, goes.
func checkLocalVolume(ctx context.Context, t *testing.T, srv *harness.APIServer, client kubernetes.Interface, root string) {
	const ns = metav1.NamespaceDefault
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}}},
	}
	if _, err := client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: harness.TestImage, ImagePullPolicy: corev1.PullNever,
					Args: []string{"pause"}, VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
			},
		}
	}
	runPod(ctx, t, client, pod("writer"))
	srv.Kubectl(t, "exec", "writer", "--", harness.TestImageCommand, "write", "/data/note", "kept")
	deletePod(ctx, t, client, ns, "writer")
	runPod(ctx, t, client, pod("reader"))
	if out := srv.Kubectl(t, "exec", "reader", "--", harness.TestImageCommand, "cat", "/data/note"); out != "kept" {
		t.Errorf("the second Pod read %q from the volume, want what the first wrote, %q", out, "kept")
	}
	c, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, fmt.Sprintf("%s_%s_%s", c.Spec.VolumeName, ns, "data"))
	if data, err := os.ReadFile(filepath.Join(dir, "note")); string(data) != "kept" {
		t.Errorf("the volume's directory %s holds %q (%v), want the Pod's note", dir, data, err)
	}
	deletePod(ctx, t, client, ns, "reader")
	if err := client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
		_, statErr := os.Stat(dir)
		return apierrors.IsNotFound(err) && errors.Is(statErr, os.ErrNotExist), nil
	})
	if err != nil {
		t.Errorf("volume %s or its directory %s still there after the claim's deletion: %v", c.Spec.VolumeName, dir, err)
	}
}

// podNetworkUp reports whether node's pod network (flannel) marked its
// network available.
func podNetworkUp(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeNetworkUnavailable {
			return c.Status == corev1.ConditionFalse && c.Reason == "FlannelIsUp"
		}
	}
	return false
}

// mirroredImage is an image of a registry that resolves nowhere, which
// the node pulls from registries.yaml's mirror (writeRegistries).
const mirroredImage = "mirror.test/kubeboot/pause:1"

// writeRegistries writes a registries.yaml with reg as mirror.test's
// second mirror (the first refuses connections), and as rewrite.test's,
// where kubeboot/NAME is renamed/NAME, with its credentials and CA, and
// returns its path.
func writeRegistries(t *testing.T, reg *harness.Registry) string {
	t.Helper()
	refused := net.JoinHostPort(strings.Split(reg.Host, ":")[0], "1")
	data := fmt.Sprintf(`mirrors:
  mirror.test:
    endpoint:
      - https://%s
      - https://%s
  rewrite.test:
    endpoint:
      - https://%[2]s
    rewrite:
      "^kubeboot/(.*)$": "renamed/$1"
configs:
  %q:
    auth:
      username: %s
      password: %s
    tls:
      ca_file: %s
`, refused, reg.Host, reg.Host, reg.Username, reg.Password, reg.CAFile)
	path := filepath.Join(t.TempDir(), "registries.yaml")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// containerdPID is the process of the embedded containerd running with
// config, 0 if none.
func containerdPID(config string) int {
	for pid, p := range harness.Processes() {
		if slices.Contains(p.Args, "containerd") && slices.Contains(p.Args, config) {
			return pid
		}
	}
	return 0
}

// containerPID is the process of the one container running `testcontainer
// command`, 0 if none.
func containerPID(command string) int {
	for pid, p := range harness.Processes() {
		if len(p.Args) > 1 && p.Args[0] == harness.TestImageCommand && p.Args[1] == command {
			return pid
		}
	}
	return 0
}

// readFile returns the content of path.
func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// checkWebKept checks, after event, that the kubelet execs in the web Pod's
// container again and that the container never restarted.
func checkWebKept(ctx context.Context, t *testing.T, srv *harness.APIServer, client kubernetes.Interface, event string) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) {
		out, err := srv.KubectlOutput("exec", "web", "--", harness.TestImageCommand, "echo", "after", "restart")
		return err == nil && out == "after restart\n", nil
	})
	if err != nil {
		t.Errorf("kubectl exec web after %s: %v", event, err)
	}
	p, err := client.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, "web", metav1.GetOptions{})
	if err != nil || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the web Pod after %s: %v; want it never restarted", event, err)
	}
}

// processesOf counts the processes (visible here) whose executable is path.
func processesOf(t *testing.T, path string) int {
	t.Helper()
	exes, err := filepath.Glob("/proc/[0-9]*/exe")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, exe := range exes {
		if target, err := os.Readlink(exe); err == nil && target == path {
			n++
		}
	}
	return n
}
