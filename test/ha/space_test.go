package ha

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeboot/kubeboot/test/harness"
)

// TestSpaceAlarm: a server whose embedded etcd reaches its quota
// (--etcd-quota-backend-bytes) refuses writes with etcd's NOSPACE error,
// acknowledges none it did not keep, and fails /readyz naming the alarm;
// a Warning Event came before, at 80% of the quota. Once the objects are
// deleted, the server compacts, defragments and clears the alarm on its
// own: /readyz is 200 again, writes succeed, and an Event says so.
func TestSpaceAlarm(t *testing.T) {
	bin, err := harness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const quota = 32 << 20
	srv := harness.StartReadyAPIServer(t, readyTimeout, bin, filepath.Join(t.TempDir(), "data"),
		"--bind-address", "127.0.0.1", "--secure-port", "0", "--service-cluster-ip-range", "10.96.0.0/16",
		"--etcd-disable-snapshots", "--audit-policy-file=", fmt.Sprintf("--etcd-quota-backend-bytes=%d", quota))
	client := srv.MustClient(t)

	// Half a MiB a create, ten a second: the server, which looks every
	// second, sees the database pass 80% of the quota before it is full.
	filler := func(i int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("filler-%d", i), Labels: map[string]string{"filler": "true"}},
			Data: map[string]string{"data": strings.Repeat(fmt.Sprint(i%10), 512<<10)}}
	}
	// A refused write raises the alarm; the server clears it at once
	// when defragmenting frees enough (the pages of Lease renewals), so
	// it fills until the alarm stays.
	acknowledged := 0
	var refusal error
	for i := 0; refusal == nil || !alarmed(ctx, client); i++ {
		if i == 2*quota/(512<<10) {
			t.Fatalf("%d creates of 512 KiB with a quota of %d bytes: the alarm did not stay raised; last refusal: %v", i, quota, refusal)
		}
		if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, filler(i), metav1.CreateOptions{}); err != nil {
			if !strings.Contains(err.Error(), "database space exceeded") {
				t.Fatalf("create %d: got %v, want etcd's database space exceeded", i, err)
			}
			refusal = err
			time.Sleep(2500 * time.Millisecond)
			continue
		}
		acknowledged++
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d creates acknowledged, then: %v", acknowledged, refusal)
	listed, err := client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{LabelSelector: "filler=true"})
	if err != nil {
		t.Fatal(err)
	}
	if len(listed.Items) != acknowledged {
		t.Errorf("%d filler ConfigMaps stored, %d acknowledged", len(listed.Items), acknowledged)
	}
	waitEvent(t, client, "EtcdSpaceLow")

	for _, cm := range listed.Items {
		if err := client.CoreV1().ConfigMaps("default").Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete with the alarm raised: %v", err)
		}
	}
	var body string
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var code int
		code, body = readyz(ctx, client)
		return code == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("/readyz after the objects were deleted:\n%s", body)
	}
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, filler(0), metav1.CreateOptions{}); err != nil {
		t.Errorf("a write once the alarm is cleared: %v", err)
	}
	waitEvent(t, client, "EtcdAlarmCleared")
}

// alarmed reports whether /readyz fails on etcd's alarms (it withholds
// the reason, NOSPACE, which the server logs).
func alarmed(ctx context.Context, client kubernetes.Interface) bool {
	code, body := readyz(ctx, client)
	return code != http.StatusOK && strings.Contains(body, "[-]etcd-alarms failed")
}

// readyz is /readyz?verbose's status code and body.
func readyz(ctx context.Context, client kubernetes.Interface) (int, string) {
	var code int
	body, _ := client.Discovery().RESTClient().Get().AbsPath("/readyz").Param("verbose", "true").Do(ctx).StatusCode(&code).Raw()
	return code, string(body)
}

// waitEvent waits for an Event of reason in kube-system.
func waitEvent(t *testing.T, client kubernetes.Interface, reason string) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := client.CoreV1().Events(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason})
		return err == nil && len(events.Items) > 0, nil
	}); err != nil {
		t.Errorf("no %s Event in kube-system", reason)
	}
}
