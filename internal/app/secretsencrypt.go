package app

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeboot/kubeboot/controlplane"
	"github.com/kubeboot/kubeboot/internal/apiserver/etcdstore"
	"github.com/kubeboot/kubeboot/internal/platform/etcd"
	"github.com/kubeboot/kubeboot/internal/platform/secretsencryption"
)

// newSecretsEncryptCommand is k3s's `secrets-encrypt` for a server
// started with --secrets-encryption: status counts the Secrets by the key
// that encrypted them, rotate-keys rotates the key on the running server.
func newSecretsEncryptCommand() *cobra.Command {
	prefix := etcdstore.DefaultPrefix
	dataDir := controlplane.DefaultDataDir()
	cmd := dataDirGroup("secrets-encrypt", "Show and rotate the encryption of Secrets at rest (--secrets-encryption)",
		"The data directory of the running server (started with --secrets-encryption, on embedded etcd).", &dataDir)
	cmd.PersistentFlags().StringVar(&prefix, "etcd-prefix", prefix, "The server's --etcd-prefix.")

	status := &cobra.Command{
		Use:   "status",
		Short: "Count the Secrets by the key that encrypted them",
		Args:  cobra.NoArgs,
		RunE: withEtcd(&dataDir, func(cmd *cobra.Command, _ []string, etcd *clientv3.Client) error {
			st, err := secretsencryption.ReadStatus(cmd.Context(), secretsencryption.ConfigPath(dataDir), etcd, prefix)
			if err != nil {
				return fmt.Errorf("--data-dir %s: %w", dataDir, err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Encryption: aescbc, writing with %s; reading %s\n", st.Keys[0], strings.Join(st.Keys, ", "))
			names := make([]string, 0, len(st.Secrets))
			for k := range st.Secrets {
				names = append(names, k)
			}
			slices.Sort(names)
			for _, k := range names {
				fmt.Fprintf(out, "Secrets encrypted with %s: %d\n", k, st.Secrets[k])
			}
			return nil
		}),
	}
	rotate := &cobra.Command{
		Use:   "rotate-keys",
		Short: "Rotate the key: a new key first, every Secret re-encrypted with it, the old keys dropped",
		Long: `Rotate the key of a server started with --secrets-encryption, while it runs: a new
aescbc key is added first (the server reloads the configuration and writes with it),
every Secret is re-encrypted with it in etcd (a Secret written meanwhile is read
again), then the old keys are dropped. No Secret is left on an old key; progress
is reported every 1,000 Secrets.`,
		Args: cobra.NoArgs,
		RunE: withEtcd(&dataDir, func(cmd *cobra.Command, _ []string, etcd *clientv3.Client) error {
			// Each server reads its own copy of the configuration: a key
			// one server writes with must be every server's first, which
			// the rotation does not do yet.
			members, err := etcd.MemberList(cmd.Context())
			if err != nil {
				return fmt.Errorf("--data-dir %s: listing etcd members (is the server running?): %w", dataDir, err)
			}
			if n := len(members.Members); n > 1 {
				return fmt.Errorf("rotate-keys: the server is one of a cluster of %d servers, whose other servers would not read the Secrets written with the new key; rotation on a cluster of servers is not supported yet, and nothing was changed", n)
			}
			admin, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, "super-admin.kubeconfig"))
			if err != nil {
				return fmt.Errorf("--data-dir %s: %w", dataDir, err)
			}
			client, err := kubernetes.NewForConfig(admin)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			start := time.Now()
			rotated, err := secretsencryption.Rotation{
				Path:   secretsencryption.ConfigPath(dataDir),
				Client: etcd,
				Prefix: prefix,
				Loaded: func(ctx context.Context, hash string) error { return waitEncryptionConfigLoaded(ctx, client, hash) },
				Progress: func(done, total int) {
					fmt.Fprintf(out, "re-encrypted %d of %d Secrets\n", done, total)
				},
			}.Run(cmd.Context(), start)
			if err != nil {
				return fmt.Errorf("rotate-keys: %w", err)
			}
			took := rotated.Reencrypted.Seconds()
			fmt.Fprintf(out, "re-encrypted %d Secrets in %s (%.0f/s); rotated to key %s in %s\n", rotated.Secrets,
				rotated.Reencrypted.Round(time.Millisecond), float64(rotated.Secrets)/max(took, 1e-9), rotated.Key, time.Since(start).Round(time.Millisecond))
			return nil
		}),
	}
	cmd.AddCommand(status, rotate)
	return cmd
}

// withEtcd is a command's RunE that runs run with a client of the
// embedded etcd of the running server on *dataDir, closed after.
func withEtcd(dataDir *string, run func(cmd *cobra.Command, args []string, etcd *clientv3.Client) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := etcd.Dial(controlplane.EtcdDirIn(*dataDir))
		if err != nil {
			return fmt.Errorf("--data-dir %s: the server's etcd: %w", *dataDir, err)
		}
		defer c.Close()
		return run(cmd, args, c)
	}
}

// waitEncryptionConfigLoaded waits, up to a minute, until the server
// reports that the encryption configuration it uses has the file content
// hash (kube-apiserver's apiserver_encryption_config_controller_last_config_info).
func waitEncryptionConfigLoaded(ctx context.Context, client kubernetes.Interface, hash string) error {
	want := fmt.Sprintf(`hash=%q`, hash)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		metrics, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return false, nil
		}
		for _, line := range strings.Split(string(metrics), "\n") {
			if strings.HasPrefix(line, "apiserver_encryption_config_controller_last_config_info{") && strings.Contains(line, want) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the server did not load the new encryption configuration within a minute (is it running, with --secrets-encryption?): %w", err)
	}
	return nil
}
