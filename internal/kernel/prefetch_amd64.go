//go:build !purego

package kernel

import "unsafe"

func prefetchImpl(p unsafe.Pointer, strideBytes, n int) { prefetchStrided((*byte)(p), strideBytes, n) }
