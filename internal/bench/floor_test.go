package bench

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"
)

// readFoldRef is readFold's definition, a byte at a time: each byte
// shifted left by 8 times its address mod 8, summed with wrap-around.
func readFoldRef(b []byte) uint64 {
	var s uint64
	for i, c := range b {
		addr := uintptr(unsafe.Pointer(&b[i]))
		s += uint64(c) << (8 * (addr % 8))
	}
	return s
}

// TestReadFold compares readFold with the byte loop on random bytes, every
// length up to 300 from every start within two words, and a long run.
func TestReadFold(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1<<16+64)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	for off := range 16 {
		for n := range 300 {
			b := buf[off : off+n]
			for _, ahead := range []bool{false, true} {
				if got, want := readFold(b, ahead), readFoldRef(b); got != want {
					t.Fatalf("start %d, %d bytes, ahead %v: %#x, want %#x", off, n, ahead, got, want)
				}
			}
		}
	}
	for _, off := range []int{0, 3, 8, 13} {
		b := buf[off : off+1<<16+off%7]
		if got, want := readFold(b, true), readFoldRef(b); got != want {
			t.Fatalf("start %d, %d bytes: %#x, want %#x", off, len(b), got, want)
		}
	}
}

// TestFloorShares: the threads' shares cover the parts' bytes exactly once
// each, in order, and a probe reads them all.
func TestFloorShares(t *testing.T) {
	parts := [][]byte{make([]byte, 1000), make([]byte, 7), nil, make([]byte, 4096), make([]byte, 1)}
	var total int64
	for _, p := range parts {
		total += int64(len(p))
	}
	for threads := 1; threads <= 5; threads++ {
		var covered int64
		var pieces int
		for th := range threads {
			lo, hi := total*int64(th)/int64(threads), total*int64(th+1)/int64(threads)
			var n int64
			for _, p := range span(parts, lo, hi) {
				n += int64(len(p))
				pieces++
			}
			if n != hi-lo {
				t.Errorf("%d threads: share %d has %d bytes, want %d", threads, th, n, hi-lo)
			}
			covered += n
		}
		if covered != total || pieces < 4 {
			t.Errorf("%d threads: shares cover %d bytes in %d pieces, want %d in at least 4", threads, covered, pieces, total)
		}
		f := NewFloor(parts, threads)
		if f.Bytes != total || f.Read(false) <= 0 || f.Read(true) <= 0 {
			t.Errorf("%d threads: floor of %d bytes", threads, f.Bytes)
		}
	}
}

// TestRunFloor gives Run a probe that reads 1 GB in fake times and checks
// that each decoding test's share of the floor pairs its repetitions with
// the probes on either side: the probe's read of repetition i's
// neighbours is 1/(10+i) s (10+i GB/s, the fastest of each four reads is
// taken, half of them asking ahead), and a token decodes in 50 ms
// (20 tok/s) against a floor of bandwidth/1 GB tok/s. A read right after
// an eviction is from memory: 1/(5+i) s, the faster of each two taken.
func TestRunFloor(t *testing.T) {
	const reps = 3
	f := &fakeSession{decodeTok: 50 * time.Millisecond, ctx: 64, vocab: 50}
	reads, aheads, evictions, memReads := 0, 0, 0, 0
	evicted := false
	floor := &Floor{Bytes: 1e9, Read: func(ahead bool) time.Duration {
		if ahead {
			aheads++
		}
		if evicted {
			evicted = false
			probe := memReads / 2
			memReads++
			if memReads%2 != 0 {
				return 2 * time.Second // the slower read of each two
			}
			return time.Duration(float64(time.Second) / float64(5+probe%(reps+1)))
		}
		probe := reads / 4
		reads++
		if reads%4 != 0 {
			return time.Second // the slower reads of each four
		}
		return time.Duration(float64(time.Second) / float64(10+probe%(reps+1)))
	}, Evict: func() bool {
		evictions++
		evicted = true
		return true
	}}
	res, err := Run(f, []Test{{Prompt: 8}, {Gen: 4}, {Prompt: 4, Gen: 4}}, Options{Repetitions: reps, Vocab: 50,
		Clock: f.clock, PeakRSS: func() int64 { return 0 }, Floor: floor})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].FloorTokS != 0 || res[0].OfFloor != 0 || res[0].MemoryTokS != 0 {
		t.Errorf("pp8 has a floor: %+v", res[0])
	}
	// Probes 10, 11, 12, 13 GB/s around the 3 repetitions: means 10.5,
	// 11.5, 12.5 GB/s; with 1 GB a token, floors of 10.5, 11.5, 12.5
	// tok/s. From memory 5, 6, 7, 8: 5.5, 6.5, 7.5.
	wantGBps := (10.5 + 11.5 + 12.5) / 3
	wantOf := (20/10.5 + 20/11.5 + 20/12.5) / 3
	wantMem := (5.5 + 6.5 + 7.5) / 3
	wantOfMem := (20/5.5 + 20/6.5 + 20/7.5) / 3
	close := func(a, b float64) bool { return math.Abs(a-b) <= 1e-6*b } // durations are whole nanoseconds
	for _, r := range res[1:] {
		if !close(r.FloorGBps, wantGBps) || !close(r.FloorTokS, wantGBps) || !close(r.OfFloor, wantOf) {
			t.Errorf("%s: floor %v GB/s, %v tok/s, share %v; want %v, %v, %v", r.Name, r.FloorGBps, r.FloorTokS, r.OfFloor, wantGBps, wantGBps, wantOf)
		}
		if !close(r.MemoryGBps, wantMem) || !close(r.MemoryTokS, wantMem) || !close(r.OfMemory, wantOfMem) {
			t.Errorf("%s: from memory %v GB/s, %v tok/s, share %v; want %v, %v, %v", r.Name, r.MemoryGBps, r.MemoryTokS, r.OfMemory, wantMem, wantMem, wantOfMem)
		}
	}
	probes := 2 * (reps + 1) // reps+1 probes per decoding test
	if reads != 4*probes || memReads != 2*probes || evictions != memReads || aheads != (reads+memReads)/2 {
		t.Errorf("%d reads, %d from memory after %d evictions, %d asking ahead; want %d, %d after as many, half asking ahead",
			reads, memReads, evictions, aheads, 4*probes, 2*probes)
	}
}

// TestFloorNoEvict: a probe that cannot evict gives no floor from memory
// and no read for it.
func TestFloorNoEvict(t *testing.T) {
	reads := 0
	f := &Floor{Bytes: 1e9, Read: func(bool) time.Duration { reads++; return time.Second }, Evict: func() bool { return false }}
	if g := f.memoryGBps(); g != 0 || reads != 0 {
		t.Errorf("memoryGBps %v after %d reads, want 0 after none", g, reads)
	}
	f.Evict = nil
	if g := f.memoryGBps(); g != 0 || reads != 0 {
		t.Errorf("without Evict: memoryGBps %v after %d reads, want 0 after none", g, reads)
	}
	if g := f.gbps(); g != 1 || reads != 4 {
		t.Errorf("gbps %v after %d reads, want 1 after 4", g, reads)
	}
}

// TestFloorKV: with Floor.KV a decoding test's floor counts, beside the
// weights, the mean cache bytes of its decode steps: a tg test over a
// depth of 10 decodes at depths 10-13, one without a depth at 1-4 (after
// its untimed token), a pg test after its depth and prompt; a prefill
// test has none. The probe reads 1 GB in a second, a step at depth d
// reads d MB of cache.
func TestFloorKV(t *testing.T) {
	f := &fakeSession{decodeTok: 50 * time.Millisecond, ctx: 64, vocab: 50}
	floor := &Floor{Bytes: 1e9, Read: func(bool) time.Duration { return time.Second },
		KV: func(d int) int64 { return int64(d) * 1e6 }}
	tests := []Test{{Gen: 4, Depth: 10}, {Gen: 4}, {Prompt: 3, Gen: 2, Depth: 6}, {Prompt: 8}}
	res, err := Run(f, tests, Options{Repetitions: 2, Vocab: 50, Clock: f.clock, PeakRSS: func() int64 { return 0 }, Floor: floor})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{11_500_000, 2_500_000, 9_500_000, 0} {
		r := res[i]
		if r.FloorKVBytes != want {
			t.Errorf("%s: %d cache bytes a token, want %d", r.Name, r.FloorKVBytes, want)
		}
		if want == 0 {
			continue
		}
		tokS := 1e9 / float64(1e9+want)
		if math.Abs(r.FloorTokS-tokS) > 1e-9*tokS || math.Abs(r.OfFloor-20/tokS) > 1e-6*20/tokS {
			t.Errorf("%s: floor %v tok/s at %v of it, want %v and %v", r.Name, r.FloorTokS, r.OfFloor, tokS, 20/tokS)
		}
	}
}
