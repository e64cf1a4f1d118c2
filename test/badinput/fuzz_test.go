package badinput

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// fuzzNamespace is where FuzzCreateBody creates.
const fuzzNamespace = "fuzz"

// The first fuzz argument picks the collection (target % 7) and the
// Content-Type (target / 7 % 3) of the POST.
var (
	fuzzCollections = []string{
		"api/v1/namespaces/" + fuzzNamespace + "/configmaps",
		"api/v1/namespaces/" + fuzzNamespace + "/services",
		"api/v1/namespaces/" + fuzzNamespace + "/pods",
		"apis/apps/v1/namespaces/" + fuzzNamespace + "/deployments",
		"apis/rbac.authorization.k8s.io/v1/namespaces/" + fuzzNamespace + "/roles",
		"apis/rbac.authorization.k8s.io/v1/namespaces/" + fuzzNamespace + "/rolebindings",
		"apis/batch/v1/namespaces/" + fuzzNamespace + "/jobs",
	}
	fuzzContentTypes = []string{ctJSON, ctYAML, ctProto}
)

// FuzzCreateBody posts fuzzed bodies to the configmaps, services, pods,
// deployments, roles, rolebindings or jobs collection of a namespace, as
// JSON, YAML or protobuf. Whatever the body,
// the server must answer (no dropped connection) with a code below 500 and
// stay ready. An object that does get created is deleted again, so that
// the Service IP and port ranges never fill up.
//
// The seeds, valid and broken manifests of each kind, are in
// testdata/fuzz/FuzzCreateBody; without -fuzz only they run.
func FuzzCreateBody(f *testing.F) {
	srv := startServer(f)
	admin := httpClientFor(f, srv.Config)
	anon := anonymousClient(f, srv.Config)
	client := kubernetes.NewForConfigOrDie(srv.Config)
	if _, err := client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fuzzNamespace}}, metav1.CreateOptions{}); err != nil {
		f.Fatal(err)
	}
	// The ServiceAccount admission plugin refuses Pods without it, and
	// there is no controller-manager to create it.
	if _, err := client.CoreV1().ServiceAccounts(fuzzNamespace).Create(context.Background(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, target uint8, body []byte) {
		collection := fuzzCollections[int(target)%len(fuzzCollections)]
		contentType := fuzzContentTypes[int(target)/len(fuzzCollections)%len(fuzzContentTypes)]
		url := srv.URL + "/" + collection
		r, err := send(admin, http.MethodPost, url, contentType, body)
		if err != nil {
			t.Fatalf("POST %s (%s, %d bytes): no HTTP answer (dropped connection?): %v", collection, contentType, len(body), err)
		}
		t.Logf("POST %s (%s, %d bytes): HTTP %d", collection, contentType, len(body), r.code)
		if r.code >= 500 {
			t.Fatalf("POST %s (%s): HTTP %d, want < 500: %.500s\nbody: %.500q", collection, contentType, r.code, r.body, body)
		}
		if r.code >= 200 && r.code < 300 {
			deleteCreated(t, admin, url, r)
		} else if _, err := statusOf(r); err != nil {
			t.Errorf("POST %s (%s): HTTP %d: %v", collection, contentType, r.code, err)
		}
		code, err := readyzCode(anon, srv.URL)
		if err != nil || code != http.StatusOK {
			t.Fatalf("/readyz after POST %s (%s) %.300q: HTTP %d, %v", collection, contentType, body, code, err)
		}
	})
}

// deleteCreated deletes the object a successful POST to collectionURL
// returned.
func deleteCreated(t *testing.T, c *http.Client, collectionURL string, created response) {
	t.Helper()
	var obj metav1.PartialObjectMetadata
	if err := json.Unmarshal(created.body, &obj); err != nil || obj.Name == "" {
		t.Fatalf("HTTP %d but no object in the answer (%v): %.300q", created.code, err, created.body)
	}
	if obj.Namespace != fuzzNamespace {
		t.Fatalf("created %s in namespace %q, posted to %q", obj.Name, obj.Namespace, fuzzNamespace)
	}
	r, err := send(c, http.MethodDelete, collectionURL+"/"+obj.Name, "", nil)
	if err != nil {
		t.Fatalf("deleting %s: %v", obj.Name, err)
	}
	if r.code != http.StatusOK && r.code != http.StatusAccepted {
		t.Fatalf("deleting %s: HTTP %d: %.300s", obj.Name, r.code, r.body)
	}
}
