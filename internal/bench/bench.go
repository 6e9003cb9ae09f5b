package bench

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/aotlm/aotlm/internal/kernel"
)

// Session is the part of an inference session a benchmark drives
// (implemented by *engine.Session).
type Session interface {
	// Prefill feeds ids at the current position and returns the logits
	// after the last of them.
	Prefill(ids []int) ([]float32, error)
	// Decode feeds one id and returns the logits after it.
	Decode(id int) ([]float32, error)
	// Reset empties the sequence.
	Reset()
	// Context is the number of positions the session holds.
	Context() int
}

// Test is one benchmark: a prompt of Prompt tokens then Gen decode steps.
// Prompt 0 is a tg test (decode after a 1-token prompt), Gen 0 a pp test.
// Depth, as llama-bench's -d, is a prompt of that many tokens prefilled
// untimed first, so that the test runs over a filled cache; a tg test
// at a depth decodes after it without the 1-token prompt.
type Test struct {
	Prompt int
	Gen    int
	Depth  int
}

// Name is the test's llama-bench name: "pp512", "tg128" or "pg512,128",
// with " @ d4096" after it at a depth of 4096.
func (t Test) Name() string {
	var name string
	switch {
	case t.Gen == 0:
		name = "pp" + strconv.Itoa(t.Prompt)
	case t.Prompt == 0:
		name = "tg" + strconv.Itoa(t.Gen)
	default:
		name = "pg" + strconv.Itoa(t.Prompt) + "," + strconv.Itoa(t.Gen)
	}
	if t.Depth > 0 {
		name += " @ d" + strconv.Itoa(t.Depth)
	}
	return name
}

// positions is the number of cache positions the test fills.
func (t Test) positions() int {
	if t.Prompt == 0 {
		return max(1, t.Depth) + t.Gen
	}
	return t.Depth + t.Prompt + t.Gen
}

// AtDepth returns tests with every Depth set to depth (>= 0).
func AtDepth(tests []Test, depth int) ([]Test, error) {
	if depth < 0 {
		return nil, fmt.Errorf("bench: depth %d is negative", depth)
	}
	out := make([]Test, len(tests))
	for i, t := range tests {
		t.Depth = depth
		out[i] = t
	}
	return out, nil
}

// Tests builds the test list of a command line: one pp test per prompt
// length, one tg test per generation length, then the pg pairs. Zero
// lengths are skipped, as llama-bench's -p 0 and -n 0 skip a kind.
func Tests(prompts, gens []int, pg [][2]int) ([]Test, error) {
	var ts []Test
	for _, p := range prompts {
		if p < 0 {
			return nil, fmt.Errorf("bench: prompt length %d is negative", p)
		}
		if p > 0 {
			ts = append(ts, Test{Prompt: p})
		}
	}
	for _, n := range gens {
		if n < 0 {
			return nil, fmt.Errorf("bench: generation length %d is negative", n)
		}
		if n > 0 {
			ts = append(ts, Test{Gen: n})
		}
	}
	for _, q := range pg {
		if q[0] < 1 || q[1] < 1 {
			return nil, fmt.Errorf("bench: pg%d,%d: both lengths must be at least 1", q[0], q[1])
		}
		ts = append(ts, Test{Prompt: q[0], Gen: q[1]})
	}
	if len(ts) == 0 {
		return nil, ErrNoTests
	}
	return ts, nil
}

// ErrNoTests is Tests' error when every length is 0.
var ErrNoTests = errors.New("bench: no tests (every length is 0)")

// ParseTests is Tests over the command line's lengths and PROMPT,GEN
// pairs (ParsePairs).
func ParseTests(prompts, gens []int, pgs []string) ([]Test, error) {
	pairs, err := ParsePairs(pgs)
	if err != nil {
		return nil, err
	}
	return Tests(prompts, gens, pairs)
}

// ContextError reports a test that needs more positions than the session's
// context holds.
type ContextError struct {
	Test      string // test name, such as "pp512"
	Positions int    // positions the test fills
	Context   int    // positions the session holds
}

// Error names the test, the positions it needs and the context.
func (e *ContextError) Error() string {
	return fmt.Sprintf("bench: %s needs %d positions, but the context is %d (compile with a larger --ctx)",
		e.Test, e.Positions, e.Context)
}

// Options controls Run.
type Options struct {
	// Repetitions of each test (< 1: 1).
	Repetitions int
	// Vocab bounds the random token ids: they are drawn from [0, Vocab).
	Vocab int
	// Seed makes the random prompts reproducible.
	Seed uint64
	// Warmup runs one untimed pass of the first test's prompt (or one
	// token) and one decode step before measuring.
	Warmup bool
	// Clock returns the current time; nil means time.Now.
	Clock func() time.Time
	// PeakRSS returns the process's peak resident bytes; nil means the
	// package's PeakRSS.
	PeakRSS func() int64
	// Floor, when set, is probed before each repetition of a test that
	// decodes and after its last, and the test's decode rate is given as
	// a share of the floor measured beside it (Result.OfFloor).
	Floor *Floor
}

// Result is the measurement of one test.
type Result struct {
	Name   string  `json:"name"`
	Prompt int     `json:"n_prompt"`
	Gen    int     `json:"n_gen"`
	Depth  int     `json:"n_depth,omitempty"`
	TokS   float64 `json:"tok_s"`  // mean of the per-repetition rates
	Stddev float64 `json:"stddev"` // sample standard deviation of the rates
	Ms     float64 `json:"ms"`     // mean wall time of a repetition
	// DecodeTokS is, for pg tests, the mean decode-only rate N / decode time.
	DecodeTokS float64 `json:"decode_tok_s,omitempty"`
	// TTFTMs is, for pp tests, the mean time from the start of the prefill
	// to the first token chosen (prefill plus one greedy sample).
	TTFTMs float64 `json:"ttft_ms,omitempty"`
	// FloorGBps is, with Options.Floor, the mean read bandwidth of the
	// decode weights around the repetitions; FloorKVBytes the mean key
	// and value bytes a decode step of the test reads from the cache
	// (Floor.KV); FloorTokS the decode rate the bandwidth allows over
	// the weight and cache bytes of a token; OfFloor the mean of each
	// repetition's decode rate over the floor of the probes before and
	// after it.
	FloorGBps    float64 `json:"floor_gbps,omitempty"`
	FloorKVBytes int64   `json:"floor_kv_bytes,omitempty"`
	FloorTokS    float64 `json:"floor_tok_s,omitempty"`
	OfFloor      float64 `json:"of_floor,omitempty"`
	// MemoryGBps, MemoryTokS and OfMemory are the same from reads of
	// the weights evicted from the caches first: the floor of memory
	// bandwidth (0 where the probe cannot evict them). A model that
	// stays in the last-level cache decodes above it.
	MemoryGBps float64   `json:"memory_gbps,omitempty"`
	MemoryTokS float64   `json:"memory_tok_s,omitempty"`
	OfMemory   float64   `json:"of_memory,omitempty"`
	RSSMB      float64   `json:"rss_mb"`     // peak resident MiB after the test
	Samples    []float64 `json:"samples_ms"` // wall time of each repetition
}

// Run checks every test against the session's context, then measures them
// in order. It returns a *ContextError, naming the context, for a test that
// does not fit, before running anything.
func Run(s Session, tests []Test, opts Options) ([]Result, error) {
	if opts.Vocab < 1 {
		return nil, fmt.Errorf("bench: vocabulary size %d must be at least 1", opts.Vocab)
	}
	ctx := s.Context()
	for _, t := range tests {
		if t.Prompt < 0 || t.Gen < 0 || t.Depth < 0 || t.Prompt+t.Gen == 0 {
			return nil, fmt.Errorf("bench: test %+v has no tokens", t)
		}
		if n := t.positions(); n > ctx {
			return nil, &ContextError{Test: t.Name(), Positions: n, Context: ctx}
		}
	}
	r := runner{s: s, opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, 0x61_6f_74_6c_6d))}
	if r.opts.Clock == nil {
		r.opts.Clock = time.Now
	}
	if r.opts.PeakRSS == nil {
		r.opts.PeakRSS = PeakRSS
	}
	if r.opts.Repetitions < 1 {
		r.opts.Repetitions = 1
	}
	if opts.Warmup && len(tests) > 0 {
		if err := r.warmup(tests[0]); err != nil {
			return nil, err
		}
	}
	out := make([]Result, 0, len(tests))
	for _, t := range tests {
		res, err := r.measure(t)
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %w", t.Name(), err)
		}
		out = append(out, res)
	}
	return out, nil
}

// runner holds the state of one Run.
type runner struct {
	s    Session
	opts Options
	rng  *rand.Rand
}

// ids returns n random valid token ids.
func (r *runner) ids(n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = r.rng.IntN(r.opts.Vocab)
	}
	return ids
}

// warmup runs the first test's prompt (or one token) and one decode step.
func (r *runner) warmup(t Test) error {
	r.s.Reset()
	logits, err := r.s.Prefill(r.ids(max(t.Prompt, 1)))
	if err != nil {
		return fmt.Errorf("bench: warm-up: %w", err)
	}
	if t.positions() > max(t.Prompt, 1) {
		if _, err := r.s.Decode(r.next(logits)); err != nil {
			return fmt.Errorf("bench: warm-up: %w", err)
		}
	}
	r.s.Reset()
	return nil
}

// next picks the token to feed after logits: the argmax, or a random id
// when the logits are empty.
func (r *runner) next(logits []float32) int {
	if len(logits) == 0 {
		return r.rng.IntN(r.opts.Vocab)
	}
	return min(Argmax(logits), r.opts.Vocab-1)
}

// measure runs t Repetitions times.
func (r *runner) measure(t Test) (Result, error) {
	res := Result{Name: t.Name(), Prompt: t.Prompt, Gen: t.Gen, Depth: t.Depth}
	rates := make([]float64, 0, r.opts.Repetitions)
	var decodeRates, ttfts []float64
	now := r.opts.Clock
	// floorGBps[i], memGBps[i]: the probes before repetition i (and
	// after the last). The plain reads come first, so that they find
	// the weights where the decode before them left them in the caches
	// (after an eviction a few reads do not bring a model the
	// last-level cache can hold back to that state: SmolLM2-135M read
	// 19-21 GB/s so where it read 22-25 without). The reads from
	// memory follow; a tg repetition's untimed one-token prompt then
	// reads every weight once before its clock starts.
	var floorGBps, memGBps, repDecode []float64
	probe := r.opts.Floor != nil && t.Gen > 0
	probeFloor := func() {
		floorGBps = append(floorGBps, r.opts.Floor.gbps())
		memGBps = append(memGBps, r.opts.Floor.memoryGBps())
	}
	for range r.opts.Repetitions {
		if probe {
			probeFloor()
		}
		r.s.Reset()
		var logits []float32
		var err error
		switch {
		case t.Depth > 0:
			// the untimed depth, then the test over it
			if logits, err = r.s.Prefill(r.ids(t.Depth)); err != nil {
				return res, err
			}
		case t.Prompt == 0:
			// tg: an untimed 1-token prompt, then N timed decode steps
			if logits, err = r.s.Prefill(r.ids(1)); err != nil {
				return res, err
			}
		}
		ids := r.ids(t.Prompt)
		start := now()
		if t.Prompt > 0 {
			if logits, err = r.s.Prefill(ids); err != nil {
				return res, err
			}
		}
		prefilled := now()
		var total time.Duration
		if t.Gen == 0 {
			Argmax(logits)
			ttfts = append(ttfts, ms(now().Sub(start)))
			total = prefilled.Sub(start)
		} else {
			for range t.Gen {
				if logits, err = r.s.Decode(r.next(logits)); err != nil {
					return res, err
				}
			}
			end := now()
			total = end.Sub(start)
			decode := rate(t.Gen, total) // tg: the whole repetition decodes
			if t.Prompt > 0 {
				decode = rate(t.Gen, end.Sub(prefilled))
				decodeRates = append(decodeRates, decode)
			}
			repDecode = append(repDecode, decode)
		}
		res.Samples = append(res.Samples, ms(total))
		rates = append(rates, rate(t.Prompt+t.Gen, total))
	}
	res.TokS, res.Stddev = MeanStddev(rates)
	res.Ms, _ = MeanStddev(res.Samples)
	res.DecodeTokS, _ = MeanStddev(decodeRates)
	res.TTFTMs, _ = MeanStddev(ttfts)
	if probe {
		probeFloor()
		res.FloorKVBytes = r.opts.Floor.kvBytes(t)
		res.FloorGBps, res.FloorTokS, res.OfFloor = r.opts.Floor.shares(floorGBps, repDecode, res.FloorKVBytes)
		res.MemoryGBps, res.MemoryTokS, res.OfMemory = r.opts.Floor.shares(memGBps, repDecode, res.FloorKVBytes)
	}
	res.RSSMB = MiB(r.opts.PeakRSS())
	return res, nil
}

// rate is n tokens over d in tokens per second; 0 when d is not positive.
func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// MiB converts bytes to mebibytes.
func MiB(b int64) float64 { return float64(b) / (1 << 20) }

// Argmax returns the index of the largest value (the first on ties), or 0
// for an empty slice.
func Argmax(xs []float32) int { return kernel.Argmax(xs) }
