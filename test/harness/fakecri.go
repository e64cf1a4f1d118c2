package harness

import (
	"context"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/fake"
	"k8s.io/cri-client/pkg/util"
)

// StartFakeCRI serves upstream's fake container runtime (k8s.io/cri-client's,
// the one the kubelet's own tests use) on a unix socket until the test ends,
// and returns its endpoint for the kubelet's --container-runtime-endpoint:
// a real kubelet runs Pods on it, with sandboxes and containers that exist
// only in the runtime's memory, on a host without containerd.
func StartFakeCRI(t testing.TB) string {
	t.Helper()
	endpoint := "unix://" + filepath.Join(t.TempDir(), "cri.sock")
	runtime := &fakeCRI{fake.NewFakeRemoteRuntime()}
	// Pulled images need a size: the kubelet refuses an image without one.
	runtime.ImageService.SetFakeImageSize(1)
	runtime.RuntimeService.FakeStatus = &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: true},
	}}
	l, err := util.CreateListener(endpoint)
	if err != nil {
		t.Fatalf("fake CRI runtime: %v", err)
	}
	server := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(server, runtime)
	runtimeapi.RegisterImageServiceServer(server, runtime)
	go func() { _ = server.Serve(l) }()
	t.Cleanup(server.Stop)
	return endpoint
}

// fakeCRI is the fake runtime with one fix: its containers report the log
// path the kubelet gave them. Without one, the kubelet's clean-up of a
// removed container's logs globs "*" in its working directory and deletes
// what it finds there.
type fakeCRI struct{ *fake.RemoteRuntime }

// CreateContainer implements runtimeapi.RuntimeServiceServer.
func (f *fakeCRI) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	resp, err := f.RemoteRuntime.CreateContainer(ctx, req)
	if err != nil {
		return nil, err
	}
	f.RuntimeService.Lock()
	defer f.RuntimeService.Unlock()
	if c, ok := f.RuntimeService.Containers[resp.ContainerId]; ok {
		c.LogPath = filepath.Join(req.GetSandboxConfig().GetLogDirectory(), req.GetConfig().GetLogPath())
	}
	return resp, nil
}
