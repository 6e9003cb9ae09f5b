package kernel

import "unsafe"

// flushChunk is how many bytes one call of the flush loop takes: the
// loop is assembly the scheduler cannot preempt, and 1 MiB of lines took
// about 40 us with CLFLUSHOPT and 2.3 ms with CLFLUSH (an Intel Xeon).
const flushChunk = 1 << 20

// FlushCaches writes back and evicts every cache line of b from every
// level of this CPU's caches (and those of the other cores, which keep
// the same lines coherent), so that the next read of b comes from
// memory. b's bytes do not change. It reports whether it could: where
// this build has no flush instruction (architectures other than amd64,
// the purego build) it does nothing and returns false.
//
// The decode floor uses it to time a read of the very weights a token
// streams from memory, where a model small enough to stay in the last
// level cache would otherwise be read from there (bench.Floor).
func FlushCaches(b []byte) bool {
	if !canFlush {
		return false
	}
	for len(b) > 0 {
		n := min(len(b), flushChunk)
		flushImpl(unsafe.Pointer(unsafe.SliceData(b)), n)
		b = b[n:]
	}
	return true
}
