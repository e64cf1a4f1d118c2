//go:build linux

package embedded

import (
	"context"
	"flag"
	"os"

	"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/manager"
	containerdcmd "github.com/containerd/containerd/v2/cmd/containerd/command"
	ctrapp "github.com/containerd/containerd/v2/cmd/ctr/app"
	"github.com/containerd/containerd/v2/pkg/shim"
	"github.com/containerd/containerd/v2/plugins"
	"github.com/containerd/plugin"
	"github.com/containerd/plugin/registry"

	// The runc v2 shim's task service.
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/task/plugin"

	// containerd's core services, as its builtins.go links them.
	_ "github.com/containerd/containerd/v2/core/runtime/v2"
	_ "github.com/containerd/containerd/v2/plugins/content/local/plugin"
	_ "github.com/containerd/containerd/v2/plugins/events"
	_ "github.com/containerd/containerd/v2/plugins/gc"
	_ "github.com/containerd/containerd/v2/plugins/imageverifier"
	_ "github.com/containerd/containerd/v2/plugins/leases"
	_ "github.com/containerd/containerd/v2/plugins/metadata"
	_ "github.com/containerd/containerd/v2/plugins/mount"
	_ "github.com/containerd/containerd/v2/plugins/nri"
	_ "github.com/containerd/containerd/v2/plugins/restart"
	_ "github.com/containerd/containerd/v2/plugins/sandbox"
	_ "github.com/containerd/containerd/v2/plugins/server/debug"
	_ "github.com/containerd/containerd/v2/plugins/server/grpc"
	_ "github.com/containerd/containerd/v2/plugins/server/metrics"
	_ "github.com/containerd/containerd/v2/plugins/server/ttrpc"
	_ "github.com/containerd/containerd/v2/plugins/services/containers"
	_ "github.com/containerd/containerd/v2/plugins/services/content"
	_ "github.com/containerd/containerd/v2/plugins/services/diff"
	_ "github.com/containerd/containerd/v2/plugins/services/events"
	_ "github.com/containerd/containerd/v2/plugins/services/healthcheck"
	_ "github.com/containerd/containerd/v2/plugins/services/images"
	_ "github.com/containerd/containerd/v2/plugins/services/introspection"
	_ "github.com/containerd/containerd/v2/plugins/services/leases"
	_ "github.com/containerd/containerd/v2/plugins/services/mounts"
	_ "github.com/containerd/containerd/v2/plugins/services/namespaces"
	_ "github.com/containerd/containerd/v2/plugins/services/opt"
	_ "github.com/containerd/containerd/v2/plugins/services/sandbox"
	_ "github.com/containerd/containerd/v2/plugins/services/snapshots"
	_ "github.com/containerd/containerd/v2/plugins/services/streaming"
	_ "github.com/containerd/containerd/v2/plugins/services/tasks"
	_ "github.com/containerd/containerd/v2/plugins/services/transfer"
	_ "github.com/containerd/containerd/v2/plugins/services/version"
	_ "github.com/containerd/containerd/v2/plugins/services/warning"
	_ "github.com/containerd/containerd/v2/plugins/streaming"
	_ "github.com/containerd/containerd/v2/plugins/transfer"

	// Linux: runc's options, cgroup metrics, the walking differ and the
	// two snapshotters a node uses.
	_ "github.com/containerd/containerd/api/types/runc/options"
	_ "github.com/containerd/containerd/v2/core/metrics/cgroups"
	_ "github.com/containerd/containerd/v2/core/metrics/cgroups/v2"
	_ "github.com/containerd/containerd/v2/plugins/diff/walking/plugin"
	_ "github.com/containerd/containerd/v2/plugins/snapshots/native/plugin"
	_ "github.com/containerd/containerd/v2/plugins/snapshots/overlay/plugin"

	// The CRI plugin: what the kubelet talks to.
	_ "github.com/containerd/containerd/v2/plugins/cri"
	_ "github.com/containerd/containerd/v2/plugins/cri/images"
	_ "github.com/containerd/containerd/v2/plugins/cri/runtime"
)

// Containerd runs containerd's command with args (args[0] is the program
// name) until ctx is done.
func Containerd(ctx context.Context, args []string) error {
	// The shim's task service is linked for the shim, not the daemon.
	keepPlugins(func(r *plugin.Registration) bool { return r.Type != plugins.TTRPCPlugin || r.ID != shimTaskPlugin })
	return containerdcmd.App().Run(ctx, args)
}

// Ctr runs containerd's ctr with args (args[0] is the program name).
func Ctr(ctx context.Context, args []string) error {
	return ctrapp.New().Run(ctx, args)
}

// shimTaskPlugin is the runc shim's one plugin of its own, its task
// service (cmd/containerd-shim-runc-v2/task/plugin).
const shimTaskPlugin = "task"

// Shim runs the runc v2 shim on os.Args, as its own binary does, and
// exits the process.
func Shim(ctx context.Context) {
	// The copy the shim starts of itself runs kubeboot's executable.
	_ = os.Setenv(ShimEnv, "1")
	// The shim parses the process's flag set, on which other packages
	// linked into kubeboot registered theirs (-version among them): the
	// shim's command line is its own.
	flag.CommandLine = flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	// The shim initializes every plugin registered in the process: only
	// its own, not the daemon's that share the binary (the content store
	// and the rest, which a shim cannot load).
	keepPlugins(func(r *plugin.Registration) bool { return r.Type == plugins.TTRPCPlugin && r.ID == shimTaskPlugin })
	shim.RunShim(ctx, manager.NewShimManager("io.containerd.runc.v2"))
	os.Exit(0)
}

// keepPlugins leaves in containerd's plugin registry only the
// registrations keep accepts.
func keepPlugins(keep func(*plugin.Registration) bool) {
	kept := registry.Graph(func(r *plugin.Registration) bool { return !keep(r) })
	registry.Reset()
	for i := range kept {
		registry.Register(&kept[i])
	}
}
