package textgen

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aotlm/aotlm/internal/decoding"
	"github.com/aotlm/aotlm/internal/sample"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// Request is one generation.
type Request struct {
	Prompt    string
	MaxTokens int
	Sampling  sample.Params
	IgnoreEOS bool
	// Raw encodes the prompt with no special tokens added (a rendered chat
	// template writes its own); special tokens in the text are still parsed.
	Raw bool
	// ExtraStop are more ids that end generation (a chat turn's end token).
	ExtraStop []int
	// Stream receives decoded text as it is produced (nil: none).
	Stream io.Writer
	// Echo writes the prompt to Stream first and decodes the continuation
	// in the prompt's context, so its first word keeps its leading space.
	Echo bool
	// PromptOnly prefills the prompt and generates nothing (MaxTokens <= 0
	// otherwise means until a stop id or a full context).
	PromptOnly bool
}

// Report is the outcome, shaped as `aotlm run --json` prints it.
type Report struct {
	PromptIDs   []int   `json:"prompt_ids"`
	IDs         []int   `json:"ids"`
	Text        string  `json:"text"`
	StopReason  string  `json:"stop_reason"`
	TTFTMs      float64 `json:"ttft_ms"`
	PrefillTokS float64 `json:"prefill_tok_s"`
	DecodeTokS  float64 `json:"decode_tok_s"`
	Seed        uint64  `json:"seed"`
}

// Model is what Run needs of a model.
type Model interface {
	BOS() int
	StopIDs() []int
}

// Encode turns the prompt into ids: the tokenizer's encoding with the
// model's special-token rule, and BOS first when the model has one and the
// tokenizer did not add it. It panics where EncodeChecked returns an error.
func Encode(tok tokenizer.Tokenizer, bos int, prompt string) []int {
	ids, err := EncodeChecked(tok, bos, prompt)
	if err != nil {
		panic(err)
	}
	return ids
}

// EncodeChecked is Encode, returning the error that stops an encoding (a
// tokenizer regex over its time limit).
func EncodeChecked(tok tokenizer.Tokenizer, bos int, prompt string) ([]int, error) {
	ids, err := tokenizer.EncodeChecked(tok, prompt, tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true})
	if err != nil {
		return nil, err
	}
	if bos >= 0 && (len(ids) == 0 || ids[0] != bos) {
		ids = append([]int{bos}, ids...)
	}
	return ids, nil
}

// Run generates text for req on a fresh session s of model m.
func Run(m Model, tok tokenizer.Tokenizer, s decoding.Session, req Request) (*Report, error) {
	if tok == nil {
		return nil, errors.New("the model has no tokenizer: pass --tokenizer <file>")
	}
	if err := req.Sampling.Validate(); err != nil {
		return nil, err
	}
	var prompt []int
	var err error
	if req.Raw {
		prompt, err = tokenizer.EncodeChecked(tok, req.Prompt, tokenizer.EncodeOptions{ParseSpecial: true})
	} else {
		prompt, err = EncodeChecked(tok, m.BOS(), req.Prompt)
	}
	if err != nil {
		return nil, err
	}
	if len(prompt) == 0 {
		return nil, errors.New("the prompt is empty and the model has no BOS token to start from")
	}
	var stop []int
	if !req.IgnoreEOS {
		stop = append(m.StopIDs(), req.ExtraStop...)
	}
	if s.Pos()+len(prompt) > s.Context() {
		// refuse before anything is echoed
		return nil, fmt.Errorf("%w: %d prompt tokens, context %d", decoding.ErrPromptTooLong, len(prompt), s.Context()-s.Pos())
	}
	stream := tokenizer.NewStreamDecoder(tok)
	if req.Stream != nil && req.Echo {
		if _, err := io.WriteString(req.Stream, req.Prompt); err != nil {
			return nil, fmt.Errorf("writing output: %w", err)
		}
		for _, id := range prompt {
			stream.Add(id) // context only: the prompt's text is already out
		}
	}
	if req.PromptOnly {
		start := time.Now()
		if _, err := s.Prefill(prompt); err != nil {
			return nil, fmt.Errorf("prefill: %w", err)
		}
		res := decoding.Result{PromptIDs: prompt, Prefill: time.Since(start), StopReason: decoding.StopLength}
		return &Report{PromptIDs: prompt, IDs: []int{}, StopReason: res.StopReason,
			PrefillTokS: res.PrefillTokS(), Seed: req.Sampling.Seed}, nil
	}
	opts := decoding.Options{
		MaxTokens: req.MaxTokens,
		Stop:      stop,
		Sampler:   sample.New(req.Sampling),
		OnToken: func(id int) error {
			if req.Stream == nil {
				return nil
			}
			if _, err := io.WriteString(req.Stream, stream.Add(id)); err != nil {
				return fmt.Errorf("writing output: %w", err)
			}
			return nil
		},
	}
	res, err := decoding.Generate(s, prompt, opts)
	if req.Stream != nil {
		io.WriteString(req.Stream, stream.Flush())
	}
	rep := &Report{PromptIDs: prompt, IDs: res.IDs, StopReason: res.StopReason,
		Text:        tok.Decode(res.IDs),
		TTFTMs:      float64(res.TTFT.Microseconds()) / 1000,
		PrefillTokS: res.PrefillTokS(), DecodeTokS: res.DecodeTokS(), Seed: req.Sampling.Seed}
	if rep.IDs == nil {
		rep.IDs = []int{}
	}
	return rep, err
}
