package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aotlm/aotlm/internal/userfile"
)

// The walks of the one-token (decode) products over a range of output
// rows. Both give every row the same bits (every AVX-512 kernel computes
// a (row, token) the same way); which streams memory faster depends on
// the CPU: its prefetchers, how many misses a core keeps in flight, its
// load ports. Tune picks one by a short timed probe.
const (
	// walkRows: one row after another in one call per range (each
	// worker reads a single sequential stream of weights).
	walkRows int32 = iota
	// walkTiles4: tiles of 4 rows side by side (4 streams, the
	// activations loaded once for the 4).
	walkTiles4
	// walkRowsMemory: walkRows with the token's activations loaded
	// from memory at every row, where walkRows holds them in registers
	// (the AVX-512 resident row loops, for the widths they take).
	walkRowsMemory
	// walkRowsPrefetch: walkRows with the weights asked for ahead of
	// their loads (16 KiB ahead into the second-level cache and 4 KiB
	// into the first, _gen/prefetch.go).
	walkRowsPrefetch
	// walkRowsMemoryPrefetch: walkRowsMemory asking ahead so.
	walkRowsMemoryPrefetch
)

var walkNames = []string{
	walkRows: "rows", walkTiles4: "tiles4", walkRowsMemory: "rows-memory",
	walkRowsPrefetch: "rows-prefetch", walkRowsMemoryPrefetch: "rows-memory-prefetch",
}

// prefetchWalk tells whether walk w asks for the weights ahead.
func prefetchWalk(w int32) bool { return w == walkRowsPrefetch || w == walkRowsMemoryPrefetch }

// residentWalk tells whether walk w takes the resident row loops where
// a width has one (holding the token's activations in registers).
func residentWalk(w int32) bool { return w == walkRows || w == walkRowsPrefetch }

// decodeWalk is the walk in use (walkRows until Tune or SetDecodeWalk).
var decodeWalk atomic.Int32

// DecodeWalk names the one-token products' walk over rows in use:
// "rows", "tiles4" or (AVX-512) "rows-memory", "rows-prefetch" or
// "rows-memory-prefetch" where the products have more than one, else
// "fixed".
func DecodeWalk() string {
	if len(decodeWalks()) < 2 {
		return "fixed"
	}
	return walkNames[decodeWalk.Load()]
}

// SetDecodeWalk sets the walk by name (one of DecodeWalk's); an error
// names the walks this build and CPU have.
func SetDecodeWalk(name string) error {
	for _, w := range decodeWalks() {
		if walkNames[w] == name {
			decodeWalk.Store(w)
			return nil
		}
	}
	var have []string
	for _, w := range decodeWalks() {
		have = append(have, walkNames[w])
	}
	if len(have) == 0 {
		return fmt.Errorf("decode walk %q: this CPU's kernels have one fixed walk", name)
	}
	return fmt.Errorf("decode walk %q is not one of %s", name, strings.Join(have, ", "))
}

// TuneResult is the outcome of Tune.
type TuneResult struct {
	CPU     string             `json:"cpu"`     // the CPU and kernels the choice is for
	Walk    string             `json:"walk"`    // the decode walk in use
	GBps    map[string]float64 `json:"gbps"`    // each walk's probe rate, weight GB/s
	Cached  bool               `json:"-"`       // read from the cache file, not probed now
	Written string             `json:"-"`       // the cache file written, if any
	Note    string             `json:"-"`       // why the choice was not probed or not cached, if so
	Version int                `json:"version"` // tuneVersion of the probe
}

// TuneEnv names the environment variable that steers TuneOnce and
// StoredTune: unset for TuneOnce to probe once per machine (cached in
// $AOTLM_CACHE/kernel-tune.json) and StoredTune to read that choice,
// "probe" for TuneOnce to probe again and rewrite the cache, "off" for
// the default walk without a probe, or a walk's name (DecodeWalk's) to
// use it.
const TuneEnv = "AOTLM_KERNEL_TUNE"

// tuneState holds the process's one tuning outcome: TuneOnce's probe or
// StoredTune's read, whichever ran first.
var tuneState struct {
	sync.Mutex
	done bool
	res  TuneResult
	err  error
}

// TuneOnce tunes the kernels for this CPU the first time it is called in
// a process, as TuneEnv says, and returns that outcome every time (also
// when StoredTune ran first). The error is for a TuneEnv value it does
// not know; a cache it cannot read or write only costs a probe, said in
// the result's Note.
func TuneOnce() (TuneResult, error) {
	tuneState.Lock()
	defer tuneState.Unlock()
	if !tuneState.done {
		file, err := tuneFile()
		if err != nil {
			file = ""
		}
		tuneState.res, tuneState.err = tuneAs(os.Getenv(TuneEnv), file)
		if err != nil && tuneState.err == nil && tuneState.res.GBps != nil {
			tuneState.res.Note = "not cached: " + err.Error()
		}
		tuneState.done = true
	}
	return tuneState.res, tuneState.err
}

// StoredTune sets the walk without a probe and without writing a file,
// the first time it is called in a process (or returns TuneOnce's
// outcome if that ran first): TuneEnv's walk ("off": the default), else
// the choice a tune stored for this CPU and kernels (TuneOnce, Tune),
// else the default walk, its Note saying that no tune is stored. Opening
// a model calls it: a load reads a choice and never times one.
func StoredTune() (TuneResult, error) {
	tuneState.Lock()
	defer tuneState.Unlock()
	if !tuneState.done {
		tuneState.res, tuneState.err = storedAs(os.Getenv(TuneEnv))
		tuneState.done = true
	}
	return tuneState.res, tuneState.err
}

// Retune probes the walks again, whatever is stored, stores the choice
// for StoredTune (the result's Written names the file) and uses it in
// this process: what `aotlm tune` runs.
func Retune() (TuneResult, error) {
	tuneState.Lock()
	defer tuneState.Unlock()
	file, err := tuneFile()
	if err != nil {
		return TuneResult{}, fmt.Errorf("kernel tune: no cache folder: %w", err)
	}
	res, err := Tune(file, true)
	if err != nil {
		return res, err
	}
	tuneState.res, tuneState.err, tuneState.done = res, nil, true
	return res, nil
}

// storedAs is StoredTune for the TuneEnv value v.
func storedAs(v string) (TuneResult, error) {
	if v != "" && v != "probe" {
		return tuneAs(v, "")
	}
	res := TuneResult{CPU: cpuKey(), Walk: DecodeWalk(), Version: tuneVersion}
	if len(decodeWalks()) < 2 {
		return res, nil
	}
	file, err := tuneFile()
	if err != nil {
		res.Note = "no tune stored: " + err.Error()
		return res, nil
	}
	c, ok := readTune(file, res.CPU)
	if !ok {
		res.Note = "no tune stored for this CPU in " + file
		return res, nil
	}
	return c, nil
}

// tuneAs tunes as the TuneEnv value v says, with the cache file (none if
// empty).
func tuneAs(v, file string) (TuneResult, error) {
	switch v {
	case "off":
		return TuneResult{CPU: cpuKey(), Walk: DecodeWalk(), Version: tuneVersion, Note: TuneEnv + "=off"}, nil
	case "", "probe":
		res, err := Tune(file, v == "probe")
		if err != nil {
			res.Note = err.Error() // the walk is set; only the cache failed
		}
		return res, nil
	}
	if err := SetDecodeWalk(v); err != nil {
		return TuneResult{}, fmt.Errorf("%s=%s: %w", TuneEnv, v, err)
	}
	return TuneResult{CPU: cpuKey(), Walk: DecodeWalk(), Version: tuneVersion, Note: TuneEnv + "=" + v}, nil
}

// tuneFile is the cache file of TuneOnce: kernel-tune.json in the folder
// of compiled artifacts ($AOTLM_CACHE, else the user cache folder's
// "aotlm", as compile.CacheDir has it).
func tuneFile() (string, error) {
	if d := os.Getenv("AOTLM_CACHE"); d != "" {
		return filepath.Join(d, "kernel-tune.json"), nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "aotlm", "kernel-tune.json"), nil
}

// tuneVersion changes whenever the kernels or the probe change, so that
// a cached choice made for other kernels is probed again.
const tuneVersion = 5

// tuneMargin is how much faster another walk must probe than rows to be
// chosen: within it the probe cannot tell them apart and rows, the
// measured default, stays.
const tuneMargin = 1.03

// Tune picks the one-token products' walk for this CPU. With a cache
// file holding a choice for the same CPU and kernels it takes that;
// otherwise it times each walk on a 4-bit and an 8-bit weight larger
// than the caches (128 MB of memory for 0.2-0.5 s on an AMD EPYC),
// keeps the fastest (rows unless another is tuneMargin faster) and writes
// the cache file when cacheFile is not empty. reprobe ignores the cache.
// Where the kernels have one walk it returns at once.
func Tune(cacheFile string, reprobe bool) (TuneResult, error) {
	res := TuneResult{CPU: cpuKey(), Version: tuneVersion}
	walks := decodeWalks()
	if len(walks) < 2 {
		res.Walk = DecodeWalk()
		return res, nil
	}
	if cacheFile != "" && !reprobe {
		if c, ok := readTune(cacheFile, res.CPU); ok {
			return c, nil
		}
	}
	res.GBps = probeWalks(walks)
	best := pickWalk(walks, res.GBps)
	decodeWalk.Store(best)
	res.Walk = walkNames[best]
	if cacheFile == "" {
		return res, nil
	}
	if err := writeTune(cacheFile, res); err != nil {
		return res, fmt.Errorf("kernel tune cache: %w", err)
	}
	res.Written = cacheFile
	return res, nil
}

// pickWalk returns the walk the probe's rates choose: walks are in order
// of preference (decodeWalks), and a later one replaces the one chosen so
// far only when it probed tuneMargin faster. Within the margin the probe
// cannot tell two walks apart, and the earlier is the one measured best
// where it could (rows: activations in registers, which the K = 576
// products favour by 5-10% though the probe's 1024-wide weights tie).
func pickWalk(walks []int32, gbps map[string]float64) int32 {
	best := walks[0]
	for _, w := range walks[1:] {
		if gbps[walkNames[w]] > tuneMargin*gbps[walkNames[best]] {
			best = w
		}
	}
	return best
}

// readTune reads a choice stored in file for the CPU and kernels cpu and
// sets its walk; ok is false when there is none to take.
func readTune(file, cpu string) (TuneResult, bool) {
	b, err := userfile.ReadFile(file, userfile.Config.Named("kernel choice"))
	if err != nil {
		return TuneResult{}, false
	}
	var c TuneResult
	if json.Unmarshal(b, &c) != nil || c.CPU != cpu || c.Version != tuneVersion || SetDecodeWalk(c.Walk) != nil {
		return TuneResult{}, false
	}
	c.Cached = true
	return c, true
}

// writeTune writes res to file through a temporary file and a rename.
func writeTune(file string, res TuneResult) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".tune-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// probeBytes is the size of each of the probe's two weights (64 MB; the
// tests of the probe's logic make it small: emulated CPUs take minutes
// over 64 MB).
var probeBytes = 64 << 20

// probeWalks times each walk on one token against a 4-bit LPBQ weight
// and an 8-bit weight of 64 MB each (together larger than the last-level
// caches of most CPUs, so the weights stream from memory as a model's
// do; Qwen3-0.6B's width, 1024, which the resident row loops take), the
// walks taking turns, and returns each walk's best rate in weight GB/s
// (both products' bytes over both times).
func probeWalks(walks []int32) map[string]float64 {
	const K = 1024
	N4, N8 := probeBytes/(K/2), probeBytes/K
	q4 := &Q4{N: N4, K: K, Nib: pattern(N4 * K / 2), Codes: pattern(N4 * K / QK), Scales: make([]float32, N4)}
	w8 := &W8{N: N8, K: K, U: pattern(N8 * K), Scales: make([]float32, N8)}
	for i := range q4.Scales {
		q4.Scales[i] = 1e-3
	}
	for i := range w8.Scales {
		w8.Scales[i] = 1e-3
	}
	r := rand.New(rand.NewPCG(1, 2))
	xf := make([]float32, K)
	for i := range xf {
		xf[i] = r.Float32()*2 - 1
	}
	x := NewQ8(1, K)
	x.Quantize(xf, 1)
	dst := make([]float32, max(N4, N8))
	bytes := float64(len(q4.Nib) + len(q4.Codes) + len(w8.U))

	saved := decodeWalk.Load()
	defer decodeWalk.Store(saved)
	best := make(map[string]float64)
	for round := range 5 {
		for _, w := range walks {
			decodeWalk.Store(w)
			start := time.Now()
			q4.MatMul(dst, N4, x, 0, N4)
			w8.MatMul(dst, N8, x, 0, N8)
			gbps := bytes / time.Since(start).Seconds() / 1e9
			if round > 0 && gbps > best[walkNames[w]] { // round 0 warms up
				best[walkNames[w]] = gbps
			}
		}
	}
	runtime.KeepAlive(dst)
	return best
}

// pattern returns n bytes of a fixed varied pattern, written (so that
// every page is backed by memory of its own, not the shared zero page)
// by doubling copies.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range min(n, 4099) {
		b[i] = byte(i*131 + i>>7)
	}
	for filled := min(n, 4099); filled < n; filled *= 2 {
		copy(b[filled:], b[:filled])
	}
	return b
}

// cpuKey names the CPU and kernels a tuned choice is for: the
// architecture, the overlays in use and, on Linux, the CPU's model name.
func cpuKey() string {
	key := runtime.GOARCH + " " + Active()
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range bytes.Split(b, []byte("\n")) {
			if name, ok := bytes.CutPrefix(line, []byte("model name")); ok {
				if _, v, ok := bytes.Cut(name, []byte(":")); ok {
					key += " " + strings.TrimSpace(string(v))
				}
				break
			}
		}
	}
	return key
}
