// Package badinput feeds kubeboot what a careless or hostile client, user or
// neighbouring program would: malformed and oversized request bodies, bad
// selectors and patches, fuzzed manifests, bad flags, foreign or broken data
// directories, and unauthenticated or wrongly authenticated requests.
//
// The API tests run against an in-process server (kubeboottest) and compare
// every key under /registry in its embedded etcd before and after each batch,
// so a request that was refused must also have left nothing behind. The
// flag, data-dir and token-file tests run the kubeboot binary, built once by
// the test harness.
//
// Everything listens on 127.0.0.1 with a port the kernel picks; nothing is
// sent off the machine.
package badinput
