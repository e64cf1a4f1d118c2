package hostnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubeboot/kubeboot/controlplane"
)

// proxyUser is the user kube-proxy acts as, which upstream's RBAC
// bootstrap policy binds to system:node-proxier.
const proxyUser = "system:kube-proxy"

// kubeletStopTimeout bounds how long the kubelet may take to exit after
// SIGTERM before it is killed.
const kubeletStopTimeout = 10 * time.Second

// The files of the node, in <data-dir>/node.
const (
	nodeDirName             = "node"
	bootstrapKubeconfigName = "bootstrap-kubelet.kubeconfig"
	kubeletKubeconfigName   = "kubelet.kubeconfig"
	kubeletConfigName       = "kubelet-config.yaml"
	kubeletCertDirName      = "pki"
	proxyKubeconfigName     = "kube-proxy.kubeconfig"
	clientCAName            = "ca.crt"
)

// kubeletCommand is kubeboot's command that runs the kubelet.
const kubeletCommand = "kubelet"

// errKubeletExited is the server's error when the kubelet exits on its own.
var errKubeletExited = errors.New("the kubelet exited")

// run sets the node up and runs the kubelet and kube-proxy until ctx is
// done or one of them fails.
func (o *Options) run(ctx context.Context, s *controlplane.Server) error {
	logger := klog.FromContext(ctx)
	dir := filepath.Join(s.DataDir(), nodeDirName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	admin := s.AdminConfig()
	client, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	bootstrapKubeconfig := filepath.Join(dir, bootstrapKubeconfigName)
	if err := setUpTLSBootstrap(client, s.URL(), admin.CAData, bootstrapKubeconfig, filepath.Join(dir, kubeletCertDirName)); err != nil {
		return err
	}
	proxyKubeconfig := filepath.Join(dir, proxyKubeconfigName)
	if err := s.WriteUserKubeconfig(proxyKubeconfig, proxyUser, nil); err != nil {
		return fmt.Errorf("kube-proxy's kubeconfig: %w", err)
	}
	kubeletConfig := filepath.Join(dir, kubeletConfigName)
	if err := writeKubeletConfig(dir, kubeletConfig, admin.CAData); err != nil {
		return fmt.Errorf("the kubelet's configuration: %w", err)
	}

	kubeletCtx, stopKubelet := context.WithCancel(ctx)
	defer stopKubelet()
	kubelet, err := o.startKubelet(kubeletCtx, dir, kubeletConfig, bootstrapKubeconfig)
	if err != nil {
		return err
	}
	logger.Info("Started the kubelet", "pid", kubelet.Process.Pid, "dir", dir)
	go func() {
		if err := s.TieNode(kubeletCtx, o.nodeName); err != nil && kubeletCtx.Err() == nil {
			logger.Error(err, "Marking the Node as this server's: deleting it will not remove the server's etcd member", "node", o.nodeName)
		}
	}()
	kubeletDone := make(chan error, 1)
	go func() { kubeletDone <- kubelet.Wait() }()
	// kube-proxy stops only with the process (its informers and servers
	// have no stop), so it is not waited for.
	proxyDone := make(chan error, 1)
	go func() { proxyDone <- o.runProxy(ctx, proxyKubeconfig) }()

	select {
	case err := <-kubeletDone:
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			return errKubeletExited
		}
		return fmt.Errorf("%w: %w", errKubeletExited, err)
	case err := <-proxyDone:
		stopKubelet()
		<-kubeletDone
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("kube-proxy: %w", err)
	case <-ctx.Done():
		<-kubeletDone
		return nil
	}
}

// writeKubeletConfig writes the kubelet's configuration file, as kubeadm
// does: requests to its port are authenticated by client certificate
// (signed by the cluster CA, written to dir) or by the apiserver's
// TokenReview, never anonymous, and authorized by SubjectAccessReview;
// its client certificate is renewed through the CSR flow.
func writeKubeletConfig(dir, path string, caPEM []byte) error {
	caFile := filepath.Join(dir, clientCAName)
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		return err
	}
	cfg := kubeletconfigv1beta1.KubeletConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: kubeletconfigv1beta1.SchemeGroupVersion.String(), Kind: "KubeletConfiguration"},
		Authentication: kubeletconfigv1beta1.KubeletAuthentication{
			X509:      kubeletconfigv1beta1.KubeletX509Authentication{ClientCAFile: caFile},
			Webhook:   kubeletconfigv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true)},
			Anonymous: kubeletconfigv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
		},
		Authorization:      kubeletconfigv1beta1.KubeletAuthorization{Mode: kubeletconfigv1beta1.KubeletAuthorizationModeWebhook},
		RotateCertificates: true,
		// Its serving certificate comes from the cluster CA through a CSR
		// (kubeletserving approves it for the node's own addresses), so
		// the API server can verify whom it reaches.
		ServerTLSBootstrap: true,
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// startKubelet starts `kubeboot kubelet` with the node's files and then
// KubeletArgs, which override them. It gets SIGTERM when ctx is done, and
// when this process dies.
func (o *Options) startKubelet(ctx context.Context, dir, config, bootstrapKubeconfig string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := append([]string{kubeletCommand,
		"--config=" + config,
		"--bootstrap-kubeconfig=" + bootstrapKubeconfig,
		"--kubeconfig=" + filepath.Join(dir, kubeletKubeconfigName),
		"--cert-dir=" + filepath.Join(dir, kubeletCertDirName),
	}, o.KubeletArgs...)
	cmd := exec.CommandContext(ctx, exe, args...)
	// Not the user's working directory: the kubelet cleans a container's
	// logs up by globbing its log path, which a runtime that reports none
	// turns into "*" in the working directory.
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = kubeletStopTimeout
	cmd.SysProcAttr = dieWithParent()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the kubelet: %w", err)
	}
	return cmd, nil
}

// runProxy runs kube-proxy, as system:kube-proxy unless --proxy-arg named
// a kubeconfig (a --config file names its own).
func (o *Options) runProxy(ctx context.Context, kubeconfig string) error {
	if !o.proxyFlags.Changed("kubeconfig") {
		if err := o.proxyFlags.Set("kubeconfig", kubeconfig); err != nil {
			return err
		}
	}
	return o.proxy.Run(ctx)
}
