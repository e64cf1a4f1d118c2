package app

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/platform/clusterjoin"
)

// serverGroup is a groupCommand whose subcommands work on a running
// cluster through one of its servers: --data-dir (what of it they use is
// uses) and --kubeconfig.
func serverGroup(use, short, uses string) (*cobra.Command, *serverTarget) {
	t := &serverTarget{dataDir: controlplane.DefaultDataDir()}
	cmd := dataDirGroup(use, short, "The data directory of a server of the cluster: "+uses+", and its admin.kubeconfig unless --kubeconfig.", &t.dataDir)
	cmd.PersistentFlags().StringVar(&t.kubeconfig, "kubeconfig", "", "A kubeconfig of a cluster admin. Default: admin.kubeconfig in --data-dir.")
	return cmd, t
}

// serverTarget is the cluster a command group works on (token,
// certificate): a server's data dir, and an admin kubeconfig.
type serverTarget struct {
	dataDir, kubeconfig string
}

// client is a client of --kubeconfig, or of the data dir's admin.kubeconfig.
func (t *serverTarget) client() (kubernetes.Interface, error) {
	path, flag := t.kubeconfig, "--kubeconfig "+t.kubeconfig
	if path == "" {
		path, flag = filepath.Join(t.dataDir, "admin.kubeconfig"), "--data-dir "+t.dataDir
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return kubernetes.NewForConfig(cfg)
}

// serverToken is the data dir's server token.
func (t *serverTarget) serverToken() (clusterjoin.Token, error) {
	token, err := clusterjoin.ReadToken(controlplane.TokenFileIn(t.dataDir))
	if err != nil {
		return token, fmt.Errorf("--data-dir %s: the server token: %w", t.dataDir, err)
	}
	return token, nil
}
