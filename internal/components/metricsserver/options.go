package metricsserver

import (
	"fmt"
	"time"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/spf13/pflag"
	msoptions "sigs.k8s.io/metrics-server/cmd/metrics-server/app/options"
)

// NewOptions returns metrics-server's options with the defaults of
// running inside kubeboot:
//   - --secure-port 0: a free port, on --bind-address, which defaults to
//     the server's advertise address; the EndpointSlice says which. Give
//     a port when a firewall stands between the servers.
//   - the kubelet's port and address as its node reports them, addresses
//     before host names (which a server cannot always resolve), as k3s's
//     metrics-server manifest has them.
func NewOptions() *msoptions.Options {
	o := msoptions.NewOptions()
	o.SecureServing.BindPort = 0
	o.SecureServing.BindAddress = nil
	o.KubeletClient.KubeletUseNodeStatusPort = true
	o.KubeletClient.KubeletPreferredAddressTypes = []string{"InternalIP", "ExternalIP", "Hostname"}
	return o
}

// forwarded are metrics-server's flag groups `kubeboot server
// --metrics-server-arg` reaches; the others are the process's (logging)
// or kubeboot's (authentication and authorization are delegated to the
// server, the kubeconfig is the in-process client).
var forwarded = []string{"kubelet client", "apiserver secure serving"}

// Flags is the flag set --metrics-server-arg parses: --metric-resolution,
// the kubelet client's flags and the serving flags.
func Flags(o *msoptions.Options) *pflag.FlagSet {
	sets := o.Flags()
	fs := pflag.NewFlagSet("metrics-server", pflag.ContinueOnError)
	fs.AddFlag(sets.FlagSet("metrics server").Lookup("metric-resolution"))
	for _, name := range forwarded {
		fs.AddFlagSet(sets.FlagSet(name))
	}
	bind := fs.Lookup("bind-address")
	bind.Usage, bind.DefValue = "The address to serve on (default: the server's advertise address).", ""
	port := fs.Lookup("secure-port")
	port.Usage = "The port to serve on; 0, the default, picks a free port (the Service's EndpointSlice names it)."
	return fs
}

// validate checks what metrics-server's own Validate checks but logging,
// which belongs to the process (its Validate applies a logging
// configuration, which the process already has).
func validate(o *msoptions.Options) error {
	errs := o.KubeletClient.Validate()
	errs = append(errs, o.SecureServing.Validate()...)
	if o.MetricResolution < minResolution {
		errs = append(errs, fmt.Errorf("--metric-resolution %s: must be at least %s", o.MetricResolution, minResolution))
	} else if o.KubeletClient.KubeletRequestTimeout > o.MetricResolution*9/10 {
		errs = append(errs, fmt.Errorf("--kubelet-request-timeout %s: must be within 90%% of --metric-resolution %s",
			o.KubeletClient.KubeletRequestTimeout, o.MetricResolution))
	}
	if len(errs) > 0 {
		// One line: each names its flag.
		return fmt.Errorf("metrics-server: %w", utilerrors.NewAggregate(errs))
	}
	return nil
}

// minResolution is metrics-server's lower bound on --metric-resolution.
const minResolution = 10 * time.Second
