//go:build !purego

package kernel

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// sumWordsImpl sums w (a multiple of 32 words: lines of 64 bytes in
// fours) with the AVX-512 or AVX2 line sums, else in Go.
func sumWordsImpl(w []uint64, ahead bool) uint64 {
	p, lines := (*byte)(unsafe.Pointer(unsafe.SliceData(w))), len(w)/8
	switch {
	case cpu.X86.HasAVX512F && ahead:
		return sumLinesZmmPf(p, lines)
	case cpu.X86.HasAVX512F:
		return sumLinesZmm(p, lines)
	case cpu.X86.HasAVX2 && ahead:
		return sumLinesYmmPf(p, lines)
	case cpu.X86.HasAVX2:
		return sumLinesYmm(p, lines)
	}
	return sumWordsGeneric(w)
}
