// Package services is how a Service gets its ClusterIPs and NodePorts:
// upstream's Service registry (defaulting, validation, IP families, the
// allocation transaction) calls kubeboot's allocators through upstream's
// allocator interfaces.
//
//   - ClusterIPs: clusterip.Allocator, one per IP family, over the
//     ServiceCIDRs of that family; one IPAddress object per allocated IP,
//     as kube-apiserver 1.33+. The registry's allocation only holds the IP;
//     the Services storage (recordingServices) creates the IPAddresses of a
//     Service's held IPs before it stores the Service.
//   - NodePorts: nodeport.Allocator, a bitmap in etcd as kube-apiserver's,
//     which shares one compare-and-swap write among concurrent requests.
//
// Their repair loops (clusterip.Repair, nodeport.Repair; docs/decisions.md
// says why not upstream's ClusterIP one) run from the
// start-service-ip-repair-controllers hook (Allocators.StartRepairs),
// which holds /readyz until the allocators have synced and both first
// passes succeeded.
package services
