package containerruntime

import _ "embed"

//go:generate go run ../../../hack/pauseimage -image registry.k8s.io/pause:3.10.1 -o pause-amd64.tar.gz

// pauseArchive is DefaultPauseImage's archive, gzipped (hack/pauseimage):
// a node whose runtime lacks it imports it, so that a node with no
// registry runs Pods whose images it has.
//
//go:embed pause-amd64.tar.gz
var pauseArchive []byte
