//go:build !(linux && amd64)

package containerruntime

// pauseArchive is none on this platform: hack/pauseimage builds pause.c
// for the machine it runs on, linux/amd64; a node here needs
// DefaultPauseImage from a registry or an air-gap tarball.
var pauseArchive []byte
