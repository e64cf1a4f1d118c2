package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/kubeboot/kubeboot/internal/platform/pki"
	"github.com/kubeboot/kubeboot/test/harness"
)

// checkTrafficIn: an app on the cluster is reached from outside its nodes,
// at every node's address, by name: through an Ingress of the default
// class (kubectl create ingress, HTTP and HTTPS with its Secret's
// certificate), and through a Gateway of class kubeboot: its HTTPRoute
// (HTTP and a WebSocket), a GRPCRoute (gRPC in h2c) and a TLSRoute (TLS
// passed through); their status has the nodes' addresses, of every
// family (addresses, in the order the status lists them); a route to a
// missing Service says so and answers 500.
func checkTrafficIn(ctx context.Context, t *testing.T, srv *harness.APIServer, client kubernetes.Interface, addresses []string, nodes ...string) {
	for _, name := range []string{"http-a", "http-b", "https-a"} {
		node, mode := nodes[0], "http"
		switch name {
		case "http-b":
			node = nodes[1]
		case "https-a":
			mode = "https"
		}
		pod := webPod(name, node, mode)
		runPod(ctx, t, client, pod)
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
		if _, err := client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("an Ingress, at every node's port 80", func(t *testing.T) {
		srv.Kubectl(t, "create", "ingress", "web", "--rule=web.example/*=http-b:80")
		for _, addr := range addresses {
			waitHTTP(t, "http://"+net.JoinHostPort(addr, "80")+"/", "web.example", nil, 200, "hello from http-b")
		}
		waitHTTP(t, "http://"+net.JoinHostPort(addresses[0], "80")+"/", "other.example", nil, 404, "")
		harness.Eventually(t, time.Minute, "the Ingress's status has the nodes' addresses", func(ctx context.Context) (bool, string) {
			ing, err := client.NetworkingV1().Ingresses(metav1.NamespaceDefault).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			var ips []string
			for _, i := range ing.Status.LoadBalancer.Ingress {
				ips = append(ips, i.IP)
			}
			return slices.Equal(ips, addresses), fmt.Sprint(ips)
		})
	})

	t.Run("an Ingress's TLS, with its Secret's certificate", func(t *testing.T) {
		kp, err := pki.NewSelfSigned(pki.ServingSpec{CommonName: "secure.example", DNSNames: []string{"secure.example"}})
		if err != nil {
			t.Fatal(err)
		}
		certPEM, keyPEM := kp.CertPEM, kp.KeyPEM
		if _, err := client.CoreV1().Secrets(metav1.NamespaceDefault).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "secure-tls"},
			Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		srv.Kubectl(t, "create", "ingress", "secure", "--rule=secure.example/*=http-a:80,tls=secure-tls")
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(certPEM)
		for _, addr := range addresses {
			waitHTTP(t, "https://"+net.JoinHostPort(addr, "443")+"/", "secure.example", &tls.Config{RootCAs: roots, ServerName: "secure.example"}, 200, "hello from http-a")
		}
	})

	t.Run("a Gateway and its HTTPRoute", func(t *testing.T) {
		config, err := srv.Config()
		if err != nil {
			t.Fatal(err)
		}
		gw := gatewayclient.NewForConfigOrDie(config).GatewayV1()
		g := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "apps", Namespace: metav1.NamespaceDefault},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: "kubeboot", Listeners: []gatewayv1.Listener{
				{Name: "http", Port: 8081, Protocol: gatewayv1.HTTPProtocolType},
				{Name: "tls", Port: 9443, Protocol: gatewayv1.TLSProtocolType, TLS: &gatewayv1.ListenerTLSConfig{Mode: ptr.To(gatewayv1.TLSModePassthrough)}},
			}}}
		if _, err := gw.Gateways(g.Namespace).Create(ctx, g, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		route := func(name, service, path string) *gatewayv1.HTTPRoute {
			return &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
				Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "apps"}}},
					Hostnames: []gatewayv1.Hostname{"app.example"},
					Rules: []gatewayv1.HTTPRouteRule{{Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Value: ptr.To(path)}}},
						BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
							Name: gatewayv1.ObjectName(service), Port: ptr.To(gatewayv1.PortNumber(80))}}}}}}}}
		}
		for _, r := range []*gatewayv1.HTTPRoute{route("app", "http-a", "/"), route("missing", "no-such-service", "/missing")} {
			if _, err := gw.HTTPRoutes(r.Namespace).Create(ctx, r, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		harness.Eventually(t, time.Minute, "the Gateway Programmed at the nodes' addresses", func(ctx context.Context) (bool, string) {
			g, err := gw.Gateways(metav1.NamespaceDefault).Get(ctx, "apps", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			var addrs []string
			for _, a := range g.Status.Addresses {
				addrs = append(addrs, a.Value)
			}
			return meta.IsStatusConditionTrue(g.Status.Conditions, "Programmed") && slices.Equal(addrs, addresses), fmt.Sprint(g.Status)
		})
		for _, addr := range addresses {
			waitHTTP(t, "http://"+net.JoinHostPort(addr, "8081")+"/", "app.example", nil, 200, "hello from http-a")
		}
		harness.Eventually(t, time.Minute, "the route to a missing Service: ResolvedRefs False, BackendNotFound", func(ctx context.Context) (bool, string) {
			r, err := gw.HTTPRoutes(metav1.NamespaceDefault).Get(ctx, "missing", metav1.GetOptions{})
			if err != nil || len(r.Status.Parents) == 0 {
				return false, fmt.Sprint(err)
			}
			c := meta.FindStatusCondition(r.Status.Parents[0].Conditions, "ResolvedRefs")
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "BackendNotFound", fmt.Sprint(r.Status.Parents)
		})
		waitHTTP(t, "http://"+net.JoinHostPort(addresses[0], "8081")+"/missing", "app.example", nil, 500, "")

		t.Run("a WebSocket, by the HTTPRoute", func(t *testing.T) {
			for _, addr := range addresses {
				c, _, err := websocket.DefaultDialer.DialContext(ctx, "ws://"+net.JoinHostPort(addr, "8081")+"/chat", http.Header{"Host": {"app.example"}})
				if err != nil {
					t.Fatalf("a WebSocket through %s: %v", addr, err)
				}
				_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
				for _, msg := range []string{"one", "two"} {
					if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
						t.Fatal(err)
					}
					if _, got, err := c.ReadMessage(); err != nil || string(got) != "http-a: "+msg {
						t.Errorf("through %s: %q, %v; want http-a's echo of %q", addr, got, err, msg)
					}
				}
				c.Close()
			}
		})

		t.Run("gRPC, by a GRPCRoute", func(t *testing.T) {
			r := &gatewayv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Name: "grpc", Namespace: metav1.NamespaceDefault},
				Spec: gatewayv1.GRPCRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "apps"}}},
					Hostnames: []gatewayv1.Hostname{"grpc.example"},
					Rules: []gatewayv1.GRPCRouteRule{{BackendRefs: []gatewayv1.GRPCBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
						Name: "http-b", Port: ptr.To(gatewayv1.PortNumber(80))}}}}}}}}
			if _, err := gw.GRPCRoutes(r.Namespace).Create(ctx, r, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, addr := range addresses {
				conn, err := grpc.NewClient(net.JoinHostPort(addr, "8081"), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("grpc.example"))
				if err != nil {
					t.Fatal(err)
				}
				// http-b's health service serves its own name only.
				harness.Eventually(t, time.Minute, "health of service http-b through "+addr, func(ctx context.Context) (bool, string) {
					resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "http-b"})
					if err != nil {
						return false, err.Error()
					}
					return resp.Status == healthpb.HealthCheckResponse_SERVING, resp.Status.String()
				})
				conn.Close()
			}
		})

		t.Run("TLS passed through by a TLSRoute, the backend's own certificate", func(t *testing.T) {
			r := &gatewayv1.TLSRoute{ObjectMeta: metav1.ObjectMeta{Name: "pass", Namespace: metav1.NamespaceDefault},
				Spec: gatewayv1.TLSRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "apps", SectionName: ptr.To(gatewayv1.SectionName("tls"))}}},
					Hostnames: []gatewayv1.Hostname{"pass.example"},
					Rules: []gatewayv1.TLSRouteRule{{BackendRefs: []gatewayv1.BackendRef{{BackendObjectReference: gatewayv1.BackendObjectReference{
						Name: "https-a", Port: ptr.To(gatewayv1.PortNumber(80))}}}}}}}
			if _, err := gw.TLSRoutes(r.Namespace).Create(ctx, r, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			// The Pod's certificate, made at its start for its name, not one
			// of the node's: the session is the client's and the Pod's.
			podCertificate := &tls.Config{ServerName: "pass.example", InsecureSkipVerify: true, VerifyConnection: func(cs tls.ConnectionState) error {
				if cn := cs.PeerCertificates[0].Subject.CommonName; cn != "https-a" {
					return fmt.Errorf("the certificate is %q's, not the Pod's", cn)
				}
				return nil
			}}
			for _, addr := range addresses {
				waitHTTP(t, "https://"+net.JoinHostPort(addr, "9443")+"/", "pass.example", podCertificate, 200, "hello from https-a")
			}
		})
	})
}

// waitHTTP waits until a request to url with host answers code (and, if
// set, body).
func waitHTTP(t *testing.T, url, host string, tlsConfig *tls.Config, code int, body string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	harness.Eventually(t, time.Minute, fmt.Sprintf("%s (Host %s) answers %d %q", url, host, code, body), func(ctx context.Context) (bool, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err.Error()
		}
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got := strings.TrimSpace(string(b))
		return resp.StatusCode == code && (body == "" || got == body), fmt.Sprintf("%d %q", resp.StatusCode, got)
	})
}
