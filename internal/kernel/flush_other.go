//go:build purego || !amd64

package kernel

import "unsafe"

// canFlush: no flush instruction in this build.
const canFlush = false

// flushImpl is never called in this build (canFlush).
func flushImpl(unsafe.Pointer, int) {}
