package decoding

import (
	"errors"
	"fmt"
	"time"

	"github.com/aotlm/aotlm/internal/sample"
)

// Session is one sequence on a backend. Logits returned by Prefill and
// Decode are those of the last position, valid until the next call.
type Session interface {
	// Prefill feeds ids at the current position and returns the logits
	// after the last of them.
	Prefill(ids []int) ([]float32, error)
	// Decode feeds one id and returns the logits after it.
	Decode(id int) ([]float32, error)
	// Pos is the number of positions filled; Context the capacity.
	Pos() int
	Context() int
}

// ErrPromptTooLong is returned when the prompt does not fit the context.
var ErrPromptTooLong = errors.New("prompt is longer than the context")

// Options configures Generate.
type Options struct {
	MaxTokens int   // stop after this many new ids (<= 0: until the context is full)
	Stop      []int // ids that end generation (not included in the output)
	Sampler   *sample.Sampler
	// OnToken is called with each new id as it is chosen; an error stops
	// generation and is returned.
	OnToken func(id int) error
}

// Stop reasons reported in Result.StopReason.
const (
	StopLength  = "length"  // MaxTokens reached
	StopEOS     = "eos"     // a stop id was drawn
	StopContext = "context" // the context is full
)

// Result is what Generate produced, with timings.
type Result struct {
	PromptIDs  []int
	IDs        []int
	StopReason string
	Prefill    time.Duration // prompt pass, up to the first logits
	TTFT       time.Duration // start to the first sampled id
	Decode     time.Duration // all single-token passes
}

// PrefillTokS and DecodeTokS are throughputs in tokens per second (0 if unmeasured).
func (r *Result) PrefillTokS() float64 { return perSecond(len(r.PromptIDs), r.Prefill) }

// DecodeTokS counts the decode passes run (one fewer than ids when the last
// id ended generation by length).
func (r *Result) DecodeTokS() float64 {
	n := len(r.IDs) - 1
	if r.StopReason == StopEOS {
		n = len(r.IDs)
	}
	return perSecond(n, r.Decode)
}

func perSecond(n int, d time.Duration) float64 {
	if n <= 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Generate prefills prompt and samples until a stop id, MaxTokens, or a full
// context. It returns what was generated even when it ends with an error.
func Generate(s Session, prompt []int, opts Options) (Result, error) {
	res := Result{PromptIDs: prompt}
	if len(prompt) == 0 {
		return res, errors.New("empty prompt: at least one id (such as BOS) is needed")
	}
	if s.Pos()+len(prompt) > s.Context() {
		return res, fmt.Errorf("%w: %d prompt tokens, context %d", ErrPromptTooLong, len(prompt), s.Context()-s.Pos())
	}
	smp := opts.Sampler
	if smp == nil {
		smp = sample.New(sample.Params{})
	}
	start := time.Now()
	logits, err := s.Prefill(prompt)
	if err != nil {
		return res, fmt.Errorf("prefill: %w", err)
	}
	res.Prefill = time.Since(start)
	decStart := time.Now()
	for {
		id := smp.Sample(logits, res.IDs)
		if len(res.IDs) == 0 {
			res.TTFT = time.Since(start)
		}
		if contains(opts.Stop, id) {
			res.StopReason = StopEOS
			break
		}
		res.IDs = append(res.IDs, id)
		if opts.OnToken != nil {
			if err := opts.OnToken(id); err != nil {
				return res, err
			}
		}
		if opts.MaxTokens > 0 && len(res.IDs) >= opts.MaxTokens {
			res.StopReason = StopLength
			break
		}
		if s.Pos() >= s.Context() {
			res.StopReason = StopContext
			break
		}
		if logits, err = s.Decode(id); err != nil {
			return res, fmt.Errorf("decode at position %d: %w", s.Pos(), err)
		}
	}
	if len(res.IDs) > 0 || res.StopReason == StopEOS {
		res.Decode = time.Since(decStart)
	}
	return res, nil
}

func contains(ids []int, id int) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
