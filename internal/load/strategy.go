package load

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/userfile"

	"github.com/aotlm/aotlm"
)

// StrategyOptions name a decoding strategy that chooses several tokens
// per pass: one of Lookahead, Lookup and Draft, or none.
type StrategyOptions struct {
	Lookahead *aotlm.LookaheadOptions
	Lookup    *aotlm.LookupOptions
	// Corpus is a text file prompt lookup finds drafts in besides the
	// prompt and the output.
	Corpus string
	// Draft is the draft model (an artifact or a checkpoint, compiled into
	// the cache) of speculative decoding, opened with Threads and Ctx;
	// DraftOptions' Context is set to what both models hold. DraftMTP
	// ("mtp") drafts with the model's own multi-token-prediction head
	// instead, with DraftOptions' sizes.
	Draft        string
	DraftOptions aotlm.DraftOptions
	Threads, Ctx int
}

// DraftMTP is the draft name of the model's own multi-token-prediction
// head (StrategyOptions.Draft).
const DraftMTP = "mtp"

// Strategy returns the strategy o names over the target model m (nil:
// plain decoding) and the draft model it opened, which the caller closes.
func Strategy(m *aotlm.Model, o StrategyOptions) (*aotlm.Strategy, *aotlm.Model, error) {
	switch {
	case o.Lookahead != nil:
		st, err := aotlm.Lookahead(*o.Lookahead)
		return st, nil, err
	case o.Lookup != nil:
		lo := *o.Lookup
		if o.Corpus != "" {
			b, err := userfile.ReadFile(o.Corpus, userfile.Corpus)
			if err != nil {
				return nil, nil, err
			}
			if lo.Corpus, err = m.Encode(string(b), true); err != nil {
				return nil, nil, fmt.Errorf("lookup corpus: %w", err)
			}
		}
		st, err := aotlm.PromptLookup(lo)
		return st, nil, err
	case o.Draft == DraftMTP:
		st, err := m.MTPStrategy(aotlm.MTPOptions{DraftMax: o.DraftOptions.DraftMax, DraftMin: o.DraftOptions.DraftMin,
			Adapt: o.DraftOptions.Adapt})
		if err != nil {
			return nil, nil, fmt.Errorf("--draft %s: %w", DraftMTP, err)
		}
		return st, nil, nil
	case o.Draft != "":
		copts := CompileDefaults()
		copts.Ctx = o.Ctx
		dm, err := Open(o.Draft, Options{Threads: o.Threads, Mode: "hybrid", Compile: copts})
		if err != nil {
			return nil, nil, fmt.Errorf("draft model: %w", err)
		}
		do := o.DraftOptions
		do.Context = min(o.Ctx, dm.Info().Context)
		st, err := m.DraftStrategy(dm, do)
		if err != nil {
			dm.Close()
			return nil, nil, fmt.Errorf("draft model %s: %w", o.Draft, err)
		}
		return st, dm, nil
	}
	return nil, nil, nil
}
