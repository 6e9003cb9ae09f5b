//go:build purego || !amd64

package kernel

import "unsafe"

// prefetchImpl: no prefetch instruction in this build.
func prefetchImpl(unsafe.Pointer, int, int) {}
