package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/internal/progress"
	"github.com/aotlm/aotlm/internal/visionload"
)

func newRunCmd() *cobra.Command {
	var (
		mf                                 *modelFlags
		prompt, promptFile                 string
		n                                  int
		p                                  aotlm.Sampling
		seed                               int64
		asJSON, ignoreEOS, useChat, verify bool
		system, acts, ggufWeights          string
		stops                              []string
		quiet                              bool
		images                             *imageFlags
		dec                                *decodingFlags
		shift                              *shiftFlags
	)
	cmd := &cobra.Command{
		Use:   "run [MODEL] [-m MODEL] -p PROMPT",
		Short: "Generate text from a prompt",
		Long:  help("run"),
		Example: `  aotlm run -p "Once upon a time" -n 40 --temp 0
  aotlm run -m stories260K.gguf -p "Once upon a time" -n 64
  aotlm run unsloth/Qwen3-0.6B-GGUF:Q8_0 -p "Why is the sky blue?" --chat
  aotlm run -m stories260K.bin --tokenizer tok512.bin -p "" -n 40 --temp 0 --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if mf.path != "" {
					return fmt.Errorf("two models: %q and -m %q", args[0], mf.path)
				}
				mf.path = args[0]
			}
			note := cmd.ErrOrStderr()
			if quiet {
				note = io.Discard
			}
			if err := checkRunFlags(n, p.RepeatLastN, seed, p); err != nil {
				return err
			}
			if promptFile != "" {
				b, err := load.ReadText(promptFile, "prompt file")
				if err != nil {
					return err
				}
				prompt = string(b)
			}
			p.Seed = seedOf(seed)
			float, err := load.FloatActivations(acts)
			if err == nil {
				err = load.CheckGGUFWeights(ggufWeights)
			}
			if err != nil {
				return fmt.Errorf("run: %w", err)
			}
			var log io.Writer
			if progress.IsTerminal(cmd.ErrOrStderr()) && !quiet {
				log = cmd.ErrOrStderr()
			}
			m, err := mf.open(note, log, compile.Options{FloatActivations: float, GGUFWeights: ggufWeights,
				MMProj: images.mmproj, VisionWeights: images.visionWeights, VisionBuckets: images.visionBuckets})
			if err != nil {
				return err
			}
			defer m.Close()
			if verify { // every checksum, weights included, before running
				if err := load.Verify(mf.path); err != nil {
					return fmt.Errorf("--verify: %w", err)
				}
			}
			if m.Tokenizer() == nil {
				return fmt.Errorf("%s has no tokenizer: pass --tokenizer <file>", mf.path)
			}
			p = applyGenerationDefaults(cmd, p, m.GenerationDefaults())
			cs, err := shift.request()
			if err != nil {
				return err
			}
			req := aotlm.Request{Prompt: prompt, MaxTokens: n, PromptOnly: n == 0, Sampling: p, IgnoreEOS: ignoreEOS, Stop: stops,
				ContextShift: cs}
			gen, vis, err := images.encode(m, mf, &req)
			if err != nil {
				return err
			}
			defer vis.Close()
			if useChat {
				if err := load.ChatPrompt(&req, system, m); err != nil {
					return err
				}
			}
			if vis != nil {
				req.IDs, err = vis.IDs(req.Prompt, req.Raw)
			} else {
				req.IDs, err = m.Encode(req.Prompt, req.Raw)
			}
			if err != nil {
				return err
			}
			s, err := gen.NewSession(min(mf.ctx, m.Info().Context))
			if errors.Is(err, visionload.ErrPositionsNeedEngine) {
				return fmt.Errorf("%w; drop --no-compile", err)
			}
			if err != nil {
				return err
			}
			defer s.Close()
			if err := load.ChooseAdapter(s, mf.loras, mf.loraStorage(), false); err != nil {
				return err
			}
			if req.Sampling.RepeatLastN == -1 {
				req.Sampling.RepeatLastN = s.Context()
			}
			// refuse before anything is echoed
			if err := req.Sampling.Validate(); err != nil {
				return err
			}
			if len(req.IDs) > s.Context() {
				return fmt.Errorf("%w: %d prompt tokens, context %d", aotlm.ErrPromptTooLong, len(req.IDs), s.Context())
			}
			defer dec.close()
			if req.Strategy, err = dec.strategy(m, mf.threads, s.Context(), vis != nil); err != nil {
				return err
			}
			out := &lineTracker{w: cmd.OutOrStdout()}
			var onToken func(aotlm.Token) error
			if !asJSON {
				if !useChat {
					if _, err := io.WriteString(out, prompt); err != nil {
						return err
					}
				}
				onToken = func(t aotlm.Token) error {
					_, err := io.WriteString(out, t.Text)
					return err
				}
			}
			res, err := s.Generate(cmd.Context(), req, onToken)
			out.endLine() // the text ends its line before any message on stderr
			if err != nil {
				return err
			}
			rep := reportOf(res, p.Seed)
			if vis != nil {
				rep.Images, rep.ImageEncodeMs = vis.Len(), float64(vis.EncodeTime.Microseconds())/1000
			}
			if asJSON {
				return json.NewEncoder(out).Encode(rep)
			}
			if quiet {
				return nil
			}
			if vis != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "%d images encoded in %.1f ms; ", rep.Images, rep.ImageEncodeMs)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "prompt %d tokens, %.1f tok/s; generated %d tokens, %.1f tok/s; first token after %.1f ms (%s)\n",
				len(rep.PromptIDs), rep.PrefillTokS, len(rep.IDs), rep.DecodeTokS, rep.TTFTMs, rep.StopReason)
			if res.Decoding != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), res.Decoding)
			}
			if res.Shifts > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "context shifts: %d, dropping %d tokens\n", res.Shifts, res.Shifted)
			}
			return nil
		},
	}
	f := cmd.Flags()
	mf = addModelFlags(f, "model file, folder or Hub repository org/name[:QUANT] (or the argument; default: the built-in demo model)", false)
	f.StringVar(&acts, "activations", "int8", activationsHelp)
	f.StringVar(&ggufWeights, "gguf-weights", compile.GGUFNative, ggufWeightsHelp)
	f.StringVarP(&prompt, "prompt", "p", "", "prompt text")
	f.StringVarP(&promptFile, "file", "f", "", "read the prompt from a file")
	f.IntVarP(&n, "n-predict", "n", 128, "number of tokens to generate (-1: until EOS or the context is full)")
	addSamplingFlags(f, &p, &seed)
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of streaming text")
	f.BoolVar(&useChat, "chat", false, "wrap the prompt as a user turn in the model's chat template")
	f.StringVar(&system, "system", "", "system message, with --chat")
	f.BoolVar(&verify, "verify", false, "check every checksum of a compiled artifact (.aot), weights included, before running")
	f.BoolVar(&ignoreEOS, "ignore-eos", false, "keep generating past the end-of-sequence token")
	f.StringArrayVar(&stops, "stop", nil, "a string that ends generation (repeatable)")
	shift = addShiftFlags(f)
	images = addImageFlags(f)
	f.BoolVarP(&quiet, "quiet", "q", false, "print the generated text only: no notes, no statistics")
	dec = addDecodingFlags(cmd)
	return cmd
}

// runReport is what `run --json` prints.
type runReport struct {
	PromptIDs   []int   `json:"prompt_ids"`
	IDs         []int   `json:"ids"`
	Text        string  `json:"text"`
	StopReason  string  `json:"stop_reason"`
	TTFTMs      float64 `json:"ttft_ms"`
	PrefillTokS float64 `json:"prefill_tok_s"`
	DecodeTokS  float64 `json:"decode_tok_s"`
	Seed        uint64  `json:"seed"`
	// Decoding reports a strategy's passes (absent for plain decoding).
	Decoding *aotlm.DecodingStats `json:"decoding,omitempty"`
	// ContextShifts and ShiftedTokens report --context-shift: the shifts
	// and the tokens they dropped (absent when the context did not fill).
	ContextShifts int `json:"context_shifts,omitempty"`
	ShiftedTokens int `json:"shifted_tokens,omitempty"`
	// Images and ImageEncodeMs report --image (absent without).
	Images        int     `json:"images,omitempty"`
	ImageEncodeMs float64 `json:"image_encode_ms,omitempty"`
}

// reportOf is the report of one generation.
func reportOf(res *aotlm.Result, seed uint64) runReport {
	return runReport{PromptIDs: res.PromptIDs, IDs: res.IDs, Text: res.Text, StopReason: res.StopReason, Seed: seed, Decoding: res.Decoding,
		ContextShifts: res.Shifts, ShiftedTokens: res.Shifted,
		TTFTMs: float64(res.TTFT.Microseconds()) / 1000, PrefillTokS: res.PrefillTokS(), DecodeTokS: res.DecodeTokS()}
}

// applyGenerationDefaults uses the model's own generation defaults (its
// generation_config.json, kept in the artifact) for sampling flags the user
// did not set.
func applyGenerationDefaults(cmd *cobra.Command, p aotlm.Sampling, g aotlm.GenerationDefaults) aotlm.Sampling {
	set := cmd.Flags().Changed
	return g.Apply(p, aotlm.SamplingSet{Temperature: set("temp"), TopP: set("top-p"), TopK: set("top-k"),
		MinP: set("min-p"), RepeatPenalty: set("repeat-penalty")})
}
