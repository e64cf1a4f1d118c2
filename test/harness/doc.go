// Package harness runs real kubeboot processes for integration tests and
// benchmarks: it builds the binary once, starts and kills apiserver
// processes, and re-runs a test inside a private network namespace whose
// loopback carries addresses from 198.51.100.0/24 (TEST-NET-2), so several
// apiservers can advertise distinct non-loopback addresses while no packet
// ever leaves the machine. For the kubelet it serves upstream's fake CRI
// runtime (StartFakeCRI) or runs containerd with images made on the machine
// (EmbeddedContainerd).
package harness
