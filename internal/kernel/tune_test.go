package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// eachWalk runs f under every decode walk this CPU's products have (once
// when they have one), restoring the walk in use after.
func eachWalk(t *testing.T, f func(t *testing.T, walk string)) {
	walks := decodeWalks()
	if len(walks) == 0 {
		f(t, DecodeWalk())
		return
	}
	saved := decodeWalk.Load()
	defer decodeWalk.Store(saved)
	for _, w := range walks {
		decodeWalk.Store(w)
		f(t, walkNames[w])
	}
}

// TestDecodeWalksSameBits: every walk of the one-token products gives
// every row the same bits (so Tune's choice never changes a logit), on
// widths with and without whole chunks of 16 blocks (and those the
// resident row loops take) and row counts with and without whole quads.
func TestDecodeWalksSameBits(t *testing.T) {
	if len(decodeWalks()) < 2 {
		t.Logf("decode walk %s: one walk, nothing to compare", DecodeWalk())
		return
	}
	r := rand.New(rand.NewPCG(51, 52))
	for _, K := range []int{QK, 18 * QK, 32 * QK, 64 * QK, 37 * QK, 3 * Q6Super} {
		for _, N := range []int{1, 5, 16, 23} {
			x, _ := randQ8(r, 1, K)
			q4c, q4s, w8 := randQ4(r, N, K, true, false), randQ4(r, N, K, false, false), randW8(r, N, K)
			var q6 *Q6 // the 6-bit rows too, where K takes them
			if K%Q6Super == 0 {
				q6, _ = randQ6(r, N, K)
			}
			var outs [][]float32
			eachWalk(t, func(t *testing.T, walk string) {
				out := make([]float32, 4*N)
				q4c.MatMul(out[:N], N, x, 0, N)
				q4s.MatMul(out[N:2*N], N, x, 0, N)
				w8.MatMul(out[2*N:3*N], N, x, 0, N)
				if q6 != nil {
					q6.MatMul(out[3*N:], N, x, 0, N)
				}
				outs = append(outs, out)
			})
			for j, w := range decodeWalks()[1:] {
				for i := range outs[0] {
					if math.Float32bits(outs[0][i]) != math.Float32bits(outs[j+1][i]) {
						t.Fatalf("K %d N %d: output %d is %g walking rows, %g walking %s", K, N, i, outs[0][i], outs[j+1][i], walkNames[w])
					}
				}
			}
			if slices.Equal(outs[0], make([]float32, 4*N)) {
				t.Fatal("all-zero outputs prove nothing")
			}
		}
	}
}

// TestTune: the probe picks a walk this CPU has and writes the cache
// file; the next call takes the cached choice without probing; a cache
// for another CPU, another probe version or a file that is not JSON is
// probed again; a forced re-probe ignores the cache.
func TestTune(t *testing.T) {
	saved, savedBytes := decodeWalk.Load(), probeBytes
	defer func() { decodeWalk.Store(saved); probeBytes = savedBytes }()
	probeBytes = 4 << 20 // the choice's logic, not the machine's rates
	file := filepath.Join(t.TempDir(), "sub", "kernel-tune.json")
	res, err := Tune(file, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(decodeWalks()) < 2 {
		if res.Walk != "fixed" || res.GBps != nil {
			t.Fatalf("one walk: got %+v", res)
		}
		return
	}
	if res.Cached || res.Written != file || res.Walk != DecodeWalk() {
		t.Fatalf("first call: %+v (walk in use %s)", res, DecodeWalk())
	}
	for _, wk := range decodeWalks() {
		if w := walkNames[wk]; res.GBps[w] <= 0 {
			t.Fatalf("walk %s not measured: %v", w, res.GBps)
		}
	}
	t.Logf("probe: %v GB/s, chose %s (%s)", res.GBps, res.Walk, res.CPU)

	// Cached: the other walk is in use, the cached one is restored.
	other := "rows"
	if res.Walk == "rows" {
		other = "tiles4"
	}
	if err := SetDecodeWalk(other); err != nil {
		t.Fatal(err)
	}
	again, err := Tune(file, false)
	if err != nil || !again.Cached || again.Walk != res.Walk || DecodeWalk() != res.Walk {
		t.Fatalf("second call: %+v, %v (walk in use %s)", again, err, DecodeWalk())
	}

	for name, content := range map[string]string{
		"not JSON":    "{{{",
		"another CPU": fmt.Sprintf(`{"cpu": "some other CPU", "walk": %q, "version": %d}`, other, tuneVersion),
		"old version": fmt.Sprintf(`{"cpu": %q, "walk": %q, "version": %d}`, res.CPU, other, tuneVersion-1),
		"bad walk":    fmt.Sprintf(`{"cpu": %q, "walk": "sideways", "version": %d}`, res.CPU, tuneVersion),
	} {
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := Tune(file, false)
		if err != nil || got.Cached || got.GBps == nil {
			t.Fatalf("%s: %+v, %v: want a new probe", name, got, err)
		}
	}
	forced, err := Tune(file, true)
	if err != nil || forced.Cached || forced.GBps == nil {
		t.Fatalf("reprobe: %+v, %v", forced, err)
	}
	if err := SetDecodeWalk("sideways"); err == nil {
		t.Fatal("SetDecodeWalk accepted an unknown walk")
	}
}

// TestTuneAs: the values of TuneEnv. "off" keeps the walk in use without
// a probe, a walk's name sets it, "probe" probes past the cache, an
// unknown value is an error naming the variable, and a cache that cannot
// be written still tunes, saying why in the note.
func TestTuneAs(t *testing.T) {
	saved, savedBytes := decodeWalk.Load(), probeBytes
	defer func() { decodeWalk.Store(saved); probeBytes = savedBytes }()
	probeBytes = 4 << 20
	res, err := tuneAs("off", "")
	if err != nil || res.GBps != nil || res.Walk != DecodeWalk() {
		t.Fatalf("off: %+v, %v", res, err)
	}
	if _, err := tuneAs("sideways", ""); err == nil || !strings.Contains(err.Error(), TuneEnv) {
		t.Fatalf("unknown value: error %v, want one naming %s", err, TuneEnv)
	}
	if len(decodeWalks()) < 2 {
		return
	}
	for _, w := range []string{"tiles4", "rows"} {
		if res, err := tuneAs(w, ""); err != nil || res.Walk != w || DecodeWalk() != w {
			t.Fatalf("%s: %+v, %v (in use %s)", w, res, err, DecodeWalk())
		}
	}
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = tuneAs("probe", filepath.Join(blocker, "kernel-tune.json")) // under a file: cannot be written
	if err != nil || res.GBps == nil || res.Note == "" || res.Written != "" {
		t.Fatalf("unwritable cache: %+v, %v", res, err)
	}
}

// TestStoredAs: StoredTune's read takes the choice stored for this CPU
// and sets its walk, and without one keeps the walk in use, saying so,
// with no probe and no file written; a walk's name still sets it.
func TestStoredAs(t *testing.T) {
	saved := decodeWalk.Load()
	defer decodeWalk.Store(saved)
	cache := t.TempDir()
	t.Setenv("AOTLM_CACHE", cache)
	if _, err := storedAs("sideways"); err == nil || !strings.Contains(err.Error(), TuneEnv) {
		t.Fatalf("unknown value: error %v, want one naming %s", err, TuneEnv)
	}
	if len(decodeWalks()) < 2 {
		if res, err := storedAs(""); err != nil || res.Walk != "fixed" {
			t.Fatalf("one walk: %+v, %v", res, err)
		}
		return
	}
	decodeWalk.Store(walkRows)
	res, err := storedAs("")
	if err != nil || res.GBps != nil || res.Cached || res.Walk != "rows" || res.Note == "" {
		t.Fatalf("nothing stored: %+v, %v", res, err)
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Fatalf("nothing stored: %d files written", len(entries))
	}
	file := filepath.Join(cache, "kernel-tune.json")
	if err := writeTune(file, TuneResult{CPU: cpuKey(), Walk: "tiles4", Version: tuneVersion}); err != nil {
		t.Fatal(err)
	}
	if res, err := storedAs(""); err != nil || !res.Cached || res.Walk != "tiles4" || DecodeWalk() != "tiles4" {
		t.Fatalf("stored tiles4: %+v, %v (in use %s)", res, err, DecodeWalk())
	}
	if err := writeTune(file, TuneResult{CPU: "another CPU", Walk: "rows", Version: tuneVersion}); err != nil {
		t.Fatal(err)
	}
	if res, err := storedAs(""); err != nil || res.Cached || DecodeWalk() != "tiles4" {
		t.Fatalf("another CPU's choice was taken: %+v, %v", res, err)
	}
	if res, err := storedAs("rows"); err != nil || res.Walk != "rows" || DecodeWalk() != "rows" {
		t.Fatalf("rows by name: %+v, %v", res, err)
	}
}

// BenchmarkDecodeWalks times every decode walk on one token against
// weights streamed from memory (4-bit LPBQ and 8-bit, 576, 1024 and 8192
// wide, 64-150 MB each), on 1 and 2 threads, the walks taking turns
// within each benchmark so that the machine's drifting bandwidth falls
// on all of them alike. It reports each walk's median rate in weight
// GB/s over 11 rounds (the first, a warm-up, is not counted) as
// GB/s-<walk>; -benchtime 1x is enough.
func BenchmarkDecodeWalks(b *testing.B) {
	walks := decodeWalks()
	if len(walks) < 2 {
		b.Logf("decode walk %s: one walk, nothing to compare", DecodeWalk())
		return
	}
	saved := decodeWalk.Load()
	defer decodeWalk.Store(saved)
	r := rand.New(rand.NewPCG(61, 62))
	for _, sh := range []struct {
		name string
		N, K int
		w8   bool
	}{
		{"q4/270336x576", 270336, 576, false}, {"q4/151936x1024", 151936, 1024, false}, {"q4/16384x8192", 16384, 8192, false},
		{"w8/135168x576", 135168, 576, true}, {"w8/75968x1024", 75968, 1024, true}, {"w8/8192x8192", 8192, 8192, true},
	} {
		x, _ := randQ8(r, 1, sh.K)
		dst := make([]float32, sh.N)
		var prod func(n0, n1 int)
		var bytes float64
		if sh.w8 {
			w := randW8(r, sh.N, sh.K)
			prod, bytes = func(n0, n1 int) { w.MatMul(dst, sh.N, x, n0, n1) }, float64(len(w.U))
		} else {
			w := randQ4(r, sh.N, sh.K, true, false)
			prod, bytes = func(n0, n1 int) { w.MatMul(dst, sh.N, x, n0, n1) }, float64(len(w.Nib)+len(w.Codes))
		}
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", sh.name, threads), func(b *testing.B) {
				rates := make(map[int32][]float64)
				for b.Loop() {
					for round := range 12 {
						for _, w := range walks {
							decodeWalk.Store(w)
							start := time.Now()
							if threads == 1 {
								prod(0, sh.N)
							} else {
								inHalves(sh.N, prod)
							}
							if round > 0 {
								rates[w] = append(rates[w], bytes/time.Since(start).Seconds()/1e9)
							}
						}
					}
				}
				for _, w := range walks {
					slices.Sort(rates[w])
					b.ReportMetric(rates[w][len(rates[w])/2], "GB/s-"+walkNames[w])
				}
			})
		}
	}
}

// TestPickWalk: the earliest walk wins unless a later one probed more
// than tuneMargin faster than the one chosen so far.
func TestPickWalk(t *testing.T) {
	walks := []int32{walkRows, walkRowsPrefetch, walkRowsMemory, walkRowsMemoryPrefetch, walkTiles4}
	for _, c := range []struct {
		gbps map[string]float64
		want int32
	}{
		{map[string]float64{"rows": 10, "rows-prefetch": 10.2, "rows-memory": 9, "rows-memory-prefetch": 10.25, "tiles4": 8}, walkRows},
		{map[string]float64{"rows": 9.9, "rows-prefetch": 12.7, "rows-memory": 9.9, "rows-memory-prefetch": 12.8, "tiles4": 9.2}, walkRowsPrefetch},
		{map[string]float64{"rows": 9.9, "rows-prefetch": 12.7, "rows-memory": 9.9, "rows-memory-prefetch": 13.5, "tiles4": 9.2}, walkRowsMemoryPrefetch},
		{map[string]float64{"rows": 23.5, "rows-prefetch": 19, "rows-memory": 20.6, "rows-memory-prefetch": 18, "tiles4": 25}, walkTiles4},
		{map[string]float64{"rows": 23.5, "rows-prefetch": 19, "rows-memory": 20.6, "rows-memory-prefetch": 18, "tiles4": 24}, walkRows},
	} {
		if got := pickWalk(walks, c.gbps); got != c.want {
			t.Errorf("%v: picked %s, want %s", c.gbps, walkNames[got], walkNames[c.want])
		}
	}
}
