package bench

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/mmapfile"
)

// Config is a benchmark of one artifact.
type Config struct {
	Tests       []Test
	Threads     int    // worker goroutines per session (< 1: 1)
	Mode        string // "hybrid" (default) or "kv"
	Repetitions int    // per test (< 1: 1)
	Warmup      bool
	Seed        uint64 // of the random prompts
	HugePages   bool   // read the artifact into huge pages (engine.Options)
	// Context is the session's cache positions: 0 the artifact's
	// compiled context, more extends it up to the model's trained context
	// (engine.Options.Context).
	Context int
	// Floor measures the decode floor beside every decoding test: the
	// read bandwidth of the weights a token streams (Options.Floor).
	Floor bool
	// Adapter, when set, gives the low-rank adapter (loaded into the
	// engine) and scale the measured session applies at run time.
	Adapter func(e *engine.Engine) (*engine.Adapter, float32, error)
}

// ParseMode maps a mode name to the engine's mode: "" and "hybrid" are
// ModeHybrid, "kv" is ModeKV.
func ParseMode(name string) (engine.Mode, error) {
	switch name {
	case "", "hybrid":
		return engine.ModeHybrid, nil
	case "kv":
		return engine.ModeKV, nil
	}
	return 0, fmt.Errorf("bench: unknown mode %q (want hybrid or kv)", name)
}

// RunArtifact opens the artifact at path with the engine, timing the open,
// and measures cfg.Tests on one session. A test longer than the artifact's
// context is refused before anything runs, with a *ContextError.
func RunArtifact(path string, cfg Config) (Report, error) {
	mode, err := ParseMode(cfg.Mode)
	if err != nil {
		return Report{}, err
	}
	tune, err := kernel.TuneOnce() // before the clock: a first probe is not the artifact's load
	if err != nil {
		return Report{}, err
	}
	start := time.Now()
	e, err := engine.OpenWith(path, engine.Options{HugePages: cfg.HugePages, Context: cfg.Context})
	if err != nil {
		return Report{}, err
	}
	load := time.Since(start)
	defer e.Close()
	m := e.Manifest()
	rep := Report{Model: filepath.Base(path), Architecture: m.Architecture, Weights: m.Weights, Ctx: e.Context(),
		Mode: mode.String(), Threads: max(cfg.Threads, 1), LoadMs: ms(load), HugePages: e.HugePages(), DecodeWalk: tune.Walk,
		Kernels: kernel.Active()}
	if err := stat(path, &rep); err != nil {
		return rep, err
	}
	s, err := e.NewSession(engine.SessionOptions{Mode: mode, Threads: cfg.Threads, Context: cfg.Context})
	if err != nil {
		return rep, err
	}
	defer s.Close()
	if cfg.Adapter != nil {
		ad, scale, err := cfg.Adapter(e)
		if err == nil {
			err = s.SetAdapter(ad, scale)
		}
		if err != nil {
			return rep, err
		}
		rep.Adapter = ad.Name()
	}
	opts := Options{Repetitions: cfg.Repetitions, Vocab: m.Vocab, Seed: cfg.Seed, Warmup: cfg.Warmup}
	if cfg.Floor {
		parts, err := e.DecodeWeights()
		if err != nil {
			return rep, err
		}
		opts.Floor = NewFloor(parts, rep.Threads)
		opts.Floor.KV = e.DecodeKVBytes
		rep.DecodeBytes = opts.Floor.Bytes
	}
	rep.Tests, err = Run(s, cfg.Tests, opts)
	if err != nil {
		return rep, err
	}
	rep.SetTTFT()
	rep.RSSMB = MiB(PeakRSS())
	rep.HugePagesPct = 100 * e.HugeShare()
	rep.Note = hugePagesNote(rep.SizeBytes, rep.HugePagesPct, rep.HugePages, mmapfile.HugePagesAvailable())
	return rep, nil
}

// stat fills the file size and parameter count of rep from the artifact's
// tensor index (an open without the weights checksum: cheap).
func stat(path string, rep *Report) error {
	a, err := artifact.Open(path, artifact.OpenOptions{})
	if err != nil {
		return err
	}
	defer a.Close()
	rep.SizeBytes, rep.Params = a.Size(), params(a)
	return nil
}

// params counts the elements of all the artifact's tensors.
func params(a *artifact.Artifact) int64 {
	var total int64
	for _, t := range a.Tensors() {
		n := int64(1)
		for _, d := range t.Shape {
			n *= d
		}
		total += n
	}
	return total
}

// minHugeNoteBytes is the artifact size from which bench says so when the
// weights streamed through 4 KiB pages: below it the TLB misses of a
// token's read cost little.
const minHugeNoteBytes = 32 << 20

// hugePagesNote returns the advice bench prints when an artifact of size
// bytes streamed its weights mostly through 4 KiB pages (pct of it huge
// mapped) although the kernel offers huge pages (available) and
// --hugepages was not given (put), else "".
func hugePagesNote(size int64, pct float64, put, available bool) string {
	if size < minHugeNoteBytes || pct >= 50 || put || !available {
		return ""
	}
	return "the weights streamed through 4 KiB pages: the page cache holds this file in small pages " +
		"(written or read in 4 KiB pieces, or a file system without large folios); --hugepages has it read back in huge folios, or copies it (docs/usage.md)"
}
