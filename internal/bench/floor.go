package bench

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/aotlm/aotlm/internal/kernel"
)

// The decode floor: a one-token step reads every weight once, so no
// decode is faster than the machine reads those bytes. The probe times
// a plain read of the very bytes decode streams (the engine's mapping,
// with its pages, huge or not, and its share of the caches), split over
// the same number of threads, right before and after each repetition:
// this machine's bandwidth moves between minutes, so the floor is
// measured beside the rate it bounds. The read is as fast as this CPU
// reads: vector loads, and the faster of reading with and without asking
// for the lines ahead (on Intel Xeons a plain loop of loads reads 40-50%
// below what the same core reads asking ahead, and the decode products,
// which ask ahead there, would beat a floor read without).
//
// A model small enough to stay in the last-level cache between tokens
// (SmolLM2-135M's 82 MiB beside an Intel Xeon's 260 MiB) is then read
// partly from the cache, and the read probe gives that cache's speed,
// not memory's. So the probe also reads the bytes twice from memory:
// each time it evicts them from every cache first (kernel.FlushCaches),
// then reads them. That is the floor of file bytes over memory bandwidth; the
// first is the floor of those bytes where they are. Where the build
// cannot evict (no flush instruction), only the first is measured.

// Floor is a probe of the decode floor: Bytes streamed per token, a
// function that reads them once (asking for the lines ahead or not) and
// returns the time it took, and one that evicts them from the caches
// (false where it cannot; nil: never).
type Floor struct {
	Bytes int64
	// KV, when set, returns the key and value bytes a decode step reads
	// from the cache at a depth (engine.Engine.DecodeKVBytes): the floor
	// of a test counts them beside Bytes, at the bandwidth the probe
	// measures on the weights.
	KV    func(depth int) int64
	Read  func(ahead bool) time.Duration
	Evict func() bool
}

// NewFloor returns the probe that reads parts split over threads
// goroutines: each reads one contiguous share of their concatenation.
func NewFloor(parts [][]byte, threads int) *Floor {
	var total int64
	for _, p := range parts {
		total += int64(len(p))
	}
	threads = max(threads, 1)
	shares := make([][][]byte, threads)
	for t := range threads {
		shares[t] = span(parts, total*int64(t)/int64(threads), total*int64(t+1)/int64(threads))
	}
	sums := make([]uint64, threads)
	return &Floor{Bytes: total, Read: func(ahead bool) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for t := 1; t < threads; t++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sums[t] = readAll(shares[t], ahead)
			}()
		}
		sums[0] = readAll(shares[0], ahead)
		wg.Wait()
		d := time.Since(start)
		for _, s := range sums {
			floorSink.Store(floorSink.Load() ^ s)
		}
		return d
	}, Evict: func() bool {
		for _, p := range parts {
			if !kernel.FlushCaches(p) {
				return false
			}
		}
		return true
	}}
}

// floorSink keeps the probe's sums, so that its reads are used.
var floorSink atomic.Uint64

// span returns the pieces of parts that cover bytes [lo, hi) of their
// concatenation.
func span(parts [][]byte, lo, hi int64) [][]byte {
	var out [][]byte
	var at int64
	for _, p := range parts {
		a, b := max(lo-at, 0), min(hi-at, int64(len(p)))
		if a < b {
			out = append(out, p[a:b])
		}
		at += int64(len(p))
	}
	return out
}

// readAll folds every piece (readFold) into one value.
func readAll(pieces [][]byte, ahead bool) uint64 {
	var s uint64
	for _, p := range pieces {
		s += readFold(p, ahead)
	}
	return s
}

// readFold reads every byte of b and returns the wrapping sum of each
// byte shifted left by 8 times its address mod 8: the sum of b's aligned
// little-endian 64-bit words, with the bytes before the first and after
// the last aligned word placed where a word would hold them. Its only use
// is that the reads cannot be dropped. The words are read by
// kernel.SumWords (vector loads; with ahead, asking for the lines ahead
// as the row loops do): a loop of 8-byte loads keeps fewer lines in
// flight, and on an Intel Xeon read 6.9 GB/s where vector loads read
// 12-16.
func readFold(b []byte, ahead bool) uint64 {
	var s uint64
	for len(b) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%8 != 0 {
		s += uint64(b[0]) << (8 * (uintptr(unsafe.Pointer(unsafe.SliceData(b))) % 8))
		b = b[1:]
	}
	n := len(b) / 8
	if n > 0 {
		s += kernel.SumWords(unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), n), ahead)
		b = b[8*n:]
	}
	for i, c := range b { // b starts aligned here
		s += uint64(c) << (8 * (i % 8))
	}
	return s
}

// gbps is the fastest of four reads, two asking ahead and two not, in
// GB/s (0 for a probe of no bytes).
func (f *Floor) gbps() float64 {
	best := 0.0
	for i := range 4 {
		if d := f.Read(i%2 == 1); d > 0 && f.Bytes > 0 {
			best = max(best, float64(f.Bytes)/d.Seconds()/1e9)
		}
	}
	return best
}

// memoryGBps is the faster of two reads of the bytes from memory, each
// right after evicting them from the caches (one read asking ahead, one
// not), in GB/s; 0 where they cannot be evicted.
func (f *Floor) memoryGBps() float64 {
	best := 0.0
	for i := range 2 {
		if f.Evict == nil || !f.Evict() {
			return 0
		}
		if d := f.Read(i == 1); d > 0 && f.Bytes > 0 {
			best = max(best, float64(f.Bytes)/d.Seconds()/1e9)
		}
	}
	return best
}

// kvBytes is the mean of the key and value bytes the decode steps of t
// read (0 without KV): its steps run at depths from the positions before
// them (the depth and the prompt, or the untimed token of a tg test) on.
func (f *Floor) kvBytes(t Test) int64 {
	if f.KV == nil || t.Gen <= 0 {
		return 0
	}
	d0 := t.Depth + t.Prompt
	if d0 == 0 {
		d0 = 1
	}
	var sum int64
	for k := range t.Gen {
		sum += f.KV(d0 + k)
	}
	return sum / int64(t.Gen)
}

// shares pairs each repetition's decode rate rates[i] with the mean of
// the probes before and after it (gbps[i], gbps[i+1]) and returns the
// mean bandwidth, the mean floor in tokens per second of the weights
// and kv bytes of the cache a token reads, and the mean share of the
// floor the decode reached.
func (f *Floor) shares(gbps, rates []float64, kv int64) (bw, floorTokS, of float64) {
	n := 0
	for i, r := range rates {
		if i+1 >= len(gbps) || f.Bytes <= 0 {
			break
		}
		g := (gbps[i] + gbps[i+1]) / 2
		if g <= 0 {
			continue
		}
		tokS := g * 1e9 / float64(f.Bytes+kv)
		bw, floorTokS, of = bw+g, floorTokS+tokS, of+r/tokS
		n++
	}
	if n == 0 {
		return 0, 0, 0
	}
	return bw / float64(n), floorTokS / float64(n), of / float64(n)
}
