package main

import (
	"fmt"
	"time"

	"github.com/aotlm/aotlm"

	"github.com/spf13/pflag"
)

// checkRunFlags validates run's numeric flags before any model is read.
func checkRunFlags(n int, repeatLastN int, seed int64, p aotlm.Sampling) error {
	switch {
	case n < -1:
		return fmt.Errorf("-n %d: want a number of tokens, 0 (only read the prompt) or -1 (until EOS or a full context)", n)
	case repeatLastN < -1:
		return fmt.Errorf("--repeat-last-n %d: want a number of tokens, or -1 for the whole context", repeatLastN)
	case seed < -1:
		return fmt.Errorf("--seed %d: want a number >= 0, or -1 for a random seed", seed)
	}
	q := p
	q.RepeatLastN = max(q.RepeatLastN, 0)
	if err := q.Validate(); err != nil {
		return fmt.Errorf("sampling: %w", err)
	}
	return nil
}

// addSamplingFlags registers the sampling flags that run and chat share,
// with llama.cpp's names and defaults.
func addSamplingFlags(f *pflag.FlagSet, p *aotlm.Sampling, seed *int64) {
	f.Float32Var(&p.Temperature, "temp", 0.8, "temperature; 0 is greedy")
	f.IntVar(&p.TopK, "top-k", 40, "keep the K most likely tokens (0: all)")
	f.Float32Var(&p.TopP, "top-p", 0.95, "nucleus sampling mass (1: off)")
	f.Float32Var(&p.MinP, "min-p", 0.05, "drop tokens below this fraction of the best one's probability (0: off)")
	f.Float32Var(&p.RepeatPenalty, "repeat-penalty", 1, "penalty for recently generated tokens (1: off)")
	f.IntVar(&p.RepeatLastN, "repeat-last-n", 64, "how many recent tokens the penalty considers")
	f.Int64Var(seed, "seed", -1, "sampling seed (-1: random)")
}

// seedOf is the sampling seed --seed asks for: the clock's for -1.
func seedOf(seed int64) uint64 {
	if seed < 0 {
		return uint64(time.Now().UnixNano())
	}
	return uint64(seed)
}

// hugePagesUsage is the help of --hugepages, which run, chat, serve and
// bench share.
const hugePagesUsage = "make sure the compiled model sits in transparent huge pages (Linux; elsewhere ignored): when the page cache does not hold the file in 2 MiB folios already " +
	"(a model compiled here usually is, and then is mapped through them without this flag), have the page cache drop the file's small pages and read it back in 2 MiB folios " +
	"(one read of the file, no extra memory, and later runs find it so), or where the file system cannot, read it into memory advised for huge pages instead of mapping it " +
	"(that memory cannot be paged out as mapped pages can); decode streams the weights with fewer TLB misses"

// stateBudgetUsage is the help of --state-budget, which run, chat and
// serve share.
const stateBudgetUsage = "bytes of recurrent state each session keeps as snapshots at its last pass boundaries, to rewind there (draft, lookup and lookahead decoding, prefix reuse), " +
	"with a K, M or G suffix; at least 3 and at most 17 snapshots whatever it says; models without recurrent state ignore it"

// jobsHelp documents --jobs of quantize and compile.
const jobsHelp = "tensors processed at once (0: one per CPU); memory grows with it"

// shiftFlags are --context-shift and --keep, which run and chat share.
type shiftFlags struct {
	on   bool
	keep int
}

// addShiftFlags registers the context shift flags.
func addShiftFlags(f *pflag.FlagSet) *shiftFlags {
	s := &shiftFlags{}
	f.BoolVar(&s.on, "context-shift", false, "when the context is full, drop the older half of the tokens after --keep and go on instead of stopping (the report tells the shifts)")
	f.IntVar(&s.keep, "keep", -1, "with --context-shift: tokens at the start never dropped (-1: the whole prompt)")
	return s
}

// request is the aotlm.ContextShift the flags ask for (nil: off).
func (s *shiftFlags) request() (*aotlm.ContextShift, error) {
	if s.keep < -1 {
		return nil, fmt.Errorf("--keep %d: want a number of tokens, or -1 for the whole prompt", s.keep)
	}
	if !s.on {
		return nil, nil
	}
	return &aotlm.ContextShift{Keep: s.keep}, nil
}
