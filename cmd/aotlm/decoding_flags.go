package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/load"
)

// decodingFlags are run's flags of the strategies that choose several
// tokens per pass: --mode lookahead|lookup and --draft.
type decodingFlags struct {
	mode                 string // "", "lookahead" or "lookup"
	ngram, window, gcap  int
	draft                string
	draftMax, draftMin   int
	draftPMin            float64
	lookupMax, lookupMin int
	corpus               string
	noAdapt              bool
	flags                *pflag.FlagSet

	draftModel *aotlm.Model
}

// addDecodingFlags registers the strategy flags on cmd. --mode keeps its
// prefill values (hybrid, kv) and takes lookahead and lookup too, which
// prefill in hybrid mode.
func addDecodingFlags(cmd *cobra.Command) *decodingFlags {
	f := cmd.Flags()
	d := &decodingFlags{flags: f}
	if m := f.Lookup("mode"); m != nil {
		m.Usage = "hybrid (AR-N prefill passes) or kv (one token at a time); lookahead or lookup decode several tokens per pass (hybrid prefill)"
		m.Value = &modeValue{inner: m.Value, d: d}
	}
	f.IntVar(&d.ngram, "ngram", 3, "lookahead: n-gram size N (>= 2)")
	f.IntVar(&d.window, "window", 5, "lookahead: window W, the Jacobi columns guessed per pass")
	f.IntVar(&d.gcap, "gcap", 3, "lookahead: verification branches G per pass; a pass holds (W+G)(N-1) rows")
	f.StringVar(&d.draft, "draft", "", "draft model (artifact or checkpoint) for speculative decoding, its tokenizer matching; \"mtp\": the model's own multi-token-prediction head")
	f.IntVar(&d.draftMax, "draft-max", 8, "most tokens drafted per pass (draft model and lookup)")
	f.IntVar(&d.draftMin, "draft-min", 1, "fewest drafted tokens worth a verify pass; fewer decode plainly")
	f.Float64Var(&d.draftPMin, "draft-p-min", 0.5, "stop drafting at a token the draft model gives less probability than this")
	f.IntVar(&d.lookupMax, "lookup-ngram-max", 3, "lookup: longest n-gram matched")
	f.IntVar(&d.lookupMin, "lookup-ngram-min", 1, "lookup: shortest n-gram matched")
	f.StringVar(&d.corpus, "lookup-corpus", "", "lookup: a text file to find drafts in besides the prompt and the output")
	f.BoolVar(&d.noAdapt, "no-adapt", false, "keep guessing even when it is slower than plain decoding")
	return d
}

// modeValue wraps --mode: lookahead and lookup select a strategy and leave
// the prefill mode hybrid.
type modeValue struct {
	inner pflag.Value
	d     *decodingFlags
}

func (v *modeValue) String() string { return v.inner.String() }
func (v *modeValue) Type() string   { return v.inner.Type() }
func (v *modeValue) Set(s string) error {
	switch s {
	case "lookahead", "lookup":
		v.d.mode = s
		return v.inner.Set("hybrid")
	}
	v.d.mode = ""
	return v.inner.Set(s)
}

// strategy returns the strategy the flags ask for (nil: plain decoding),
// opening the draft model with the target's threads and context; a
// prompt with images decodes plainly.
func (d *decodingFlags) strategy(m *aotlm.Model, threads, ctx int, withImages bool) (*aotlm.Strategy, error) {
	switch {
	case d.draft != "" && d.mode != "":
		return nil, fmt.Errorf("--draft and --mode %s: choose one strategy", d.mode)
	case withImages && (d.draft != "" || d.mode != ""):
		return nil, errors.New("--image decodes one token per pass: drop --draft and --mode lookahead|lookup")
	}
	adapt := aotlm.Adapt{Off: d.noAdapt}
	o := load.StrategyOptions{Corpus: d.corpus, Draft: d.draft, Threads: threads, Ctx: ctx,
		DraftOptions: aotlm.DraftOptions{DraftMax: d.draftMax, DraftMin: d.draftMin, PMin: d.draftPMin, Adapt: adapt}}
	if d.draft == load.DraftMTP && !d.flags.Changed("draft-max") {
		o.DraftOptions.DraftMax = 0 // the head's own default
	}
	switch d.mode {
	case "lookahead":
		o.Lookahead = &aotlm.LookaheadOptions{N: d.ngram, W: d.window, G: d.gcap, Adapt: adapt}
	case "lookup":
		o.Lookup = &aotlm.LookupOptions{NgramMax: d.lookupMax, NgramMin: d.lookupMin, DraftMax: d.draftMax, DraftMin: d.draftMin, Adapt: adapt}
	}
	st, dm, err := load.Strategy(m, o)
	d.draftModel = dm
	return st, err
}

// close releases the draft model.
func (d *decodingFlags) close() { d.draftModel.Close() }
