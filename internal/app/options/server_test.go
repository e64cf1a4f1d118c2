package options

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/kubeboot/kubeboot/internal/components/kubecontrollermanager"
	"github.com/kubeboot/kubeboot/internal/components/simulatednodes"
)

// TestClusterCIDRForSimulatedNodes: node IPAM's range is --cluster-cidr's
// default unless the simulated nodes need more CIDRs than it holds and
// --cluster-cidr is not given; then it is --simulated-node-cidr's, and a
// count beyond that is refused naming --simulated-node-cidr.
func TestClusterCIDRForSimulatedNodes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    string
		wantErr string
	}{
		{"no simulated nodes", nil, kubecontrollermanager.DefaultClusterCIDR, ""},
		{"as many as the default holds", []string{"--simulated-nodes=256"}, kubecontrollermanager.DefaultClusterCIDR, ""},
		{"more than the default holds", []string{"--simulated-nodes=257"}, simulatednodes.DefaultPodCIDR, ""},
		{"5,000", []string{"--simulated-nodes=5000"}, simulatednodes.DefaultPodCIDR, ""},
		{"more than the default holds, smaller node CIDRs", []string{"--simulated-nodes=1024", "--node-cidr-mask-size=26"}, kubecontrollermanager.DefaultClusterCIDR, ""},
		{"--simulated-node-cidr's own", []string{"--simulated-nodes=300", "--simulated-node-cidr=10.96.0.0/12"}, "10.96.0.0/12", ""},
		{"more than --simulated-node-cidr holds", []string{"--simulated-nodes=16385"}, simulatednodes.DefaultPodCIDR, "--simulated-node-cidr"},
		{"--cluster-cidr given", []string{"--simulated-nodes=257", "--cluster-cidr=10.42.0.0/16"}, "10.42.0.0/16", "--cluster-cidr"},
		{"--cluster-cidr given through --controller-manager-arg", []string{"--simulated-nodes=257", "--controller-manager-arg=--cluster-cidr=10.42.0.0/16"}, "10.42.0.0/16", "--cluster-cidr"},
		{"node IPAM off", []string{"--simulated-nodes=5000", "--allocate-node-cidrs=false", "--flannel-backend=none"}, kubecontrollermanager.DefaultClusterCIDR, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := NewServer()
			if err != nil {
				t.Fatal(err)
			}
			fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err = o.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Validate: %v, want an error naming %s", err, tc.wantErr)
			}
			if got := o.Config().Nodes.PodNetwork.ClusterCIDR; got != tc.want {
				t.Errorf("cluster CIDR %s, want %s", got, tc.want)
			}
		})
	}
}
