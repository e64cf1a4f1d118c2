// Package printers turns stored objects into metav1.Table responses, the
// format kubectl asks for when it runs `kubectl get`.
//
// Each constructor (Services, Endpoints, Events, ...) returns a *Table for one
// resource. A Table implements k8s.io/apiserver/pkg/registry/rest.TableConvertor
// and produces the same column definitions and cell values as kube-apiserver
// 1.36's server-side printers (which always print the "wide" column set and
// leave it to the client to hide priority>0 columns). Column descriptions are
// taken from the SwaggerDoc() methods of the k8s.io/api types, as upstream
// does, rather than copied by hand.
//
// The code is written for kubeboot; upstream's printers were read only to learn
// the exact output formats (the "<none>", "<pending>", "<unset>" markers and
// the "+ N more..." truncation rules).
package printers
