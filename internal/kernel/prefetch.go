package kernel

import "unsafe"

// PrefetchSlots asks for s[at], s[at+stride], ... (n elements, those
// within s) to be brought into the caches ahead of stores into them: a
// hint, which does nothing where the build has no prefetch instruction.
// Decode stores each layer's new key and value into one slot of every
// column of a transposed cache, a cache line per column that the weights
// streamed since the last token have evicted; asked a layer ahead, the
// lines are near when the store comes.
func PrefetchSlots[E uint8 | uint16 | float32](s []E, at, stride, n int) {
	if at < 0 || stride <= 0 || at >= len(s) {
		return
	}
	n = min(n, (len(s)-1-at)/stride+1)
	if n < 1 {
		return
	}
	var e E
	prefetchImpl(unsafe.Pointer(&s[at]), stride*int(unsafe.Sizeof(e)), n)
}

// PrefetchRun asks for the cache lines of s[at:at+n] (those within s), a
// hint like PrefetchSlots: a contiguous run, such as one key/value head's
// slots of a head-major cache, that a pass will read from memory.
func PrefetchRun[E uint8 | uint16 | float32](s []E, at, n int) {
	if n <= 0 {
		return
	}
	var e E
	line := prefetchLine / int(unsafe.Sizeof(e))
	PrefetchSlots(s, at, line, (n+line-1)/line)
}

// prefetchLine is the cache line size PrefetchRun steps by.
const prefetchLine = 64
