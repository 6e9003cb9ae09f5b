package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/internal/progress"
	"github.com/aotlm/aotlm/internal/userfile"
)

func newRunCmd() *cobra.Command {
	var (
		modelPath, tokPath, prompt, promptFile string
		n, threads, ctx                        int
		hugePages                              bool
		p                                      aotlm.Sampling
		seed                                   int64
		asJSON, ignoreEOS, useChat, verify     bool
		system, mode, kv, acts, ggufWeights    string
		arLen                                  int
		noCompile                              bool
		stops                                  []string
		templatePath                           string
		quiet                                  bool
		images                                 *imageFlags
		dec                                    *decodingFlags
	)
	cmd := &cobra.Command{
		Use:   "run [MODEL] [-m MODEL] -p PROMPT",
		Short: "Generate text from a prompt",
		Long: `Generate text from a prompt, streaming it to stdout as it is produced.

MODEL is a compiled artifact (.aot, from aotlm compile), a GGUF file, a
llama2.c checkpoint (.bin, with --tokenizer), a Hugging Face folder
(config.json + model.safetensors + tokenizer files), or a quantized folder
(from aotlm quantize), or a Hugging Face Hub repository, org/name[@rev][:QUANT],
pulled into the Hugging Face cache first (see aotlm pull). MODEL may be
given with -m or as the argument. Without a model, the demo model built into
the binary runs (stories260K, a 260K-parameter TinyStories model). A model
that is not an artifact is compiled into the cache first ($AOTLM_CACHE,
default the user cache folder), once per model and options; --no-compile
runs it through the graph interpreter instead.
--temp 0 decodes greedily; --seed makes sampling reproducible. The text goes
to stdout, notes and statistics to stderr (--quiet: the text only).`,
		Example: `  aotlm run -p "Once upon a time" -n 40 --temp 0
  aotlm run -m stories260K.gguf -p "Once upon a time" -n 64
  aotlm run unsloth/Qwen3-0.6B-GGUF:Q8_0 -p "Why is the sky blue?" --chat
  aotlm run -m stories260K.bin --tokenizer tok512.bin -p "" -n 40 --temp 0 --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if modelPath != "" {
					return fmt.Errorf("two models: %q and -m %q", args[0], modelPath)
				}
				modelPath = args[0]
			}
			note := cmd.ErrOrStderr()
			if quiet {
				note = io.Discard
			}
			var err error
			if modelPath, err = resolveModel(modelPath, note); err != nil {
				return err
			}
			if modelPath, err = resolveModelArg(modelPath, note); err != nil {
				return err
			}
			if err := checkRunFlags(n, &ctx, p.RepeatLastN, seed, p); err != nil {
				return err
			}
			if promptFile != "" {
				b, err := userfile.ReadFile(promptFile, userfile.Text.Named("prompt file"))
				if err != nil {
					return err
				}
				prompt = string(b)
			}
			if seed < 0 {
				p.Seed = uint64(time.Now().UnixNano())
			} else {
				p.Seed = uint64(seed)
			}
			if verify {
				// the full checksum check, weights included, before running
				if err := load.Verify(modelPath); err != nil {
					return fmt.Errorf("--verify: %w", err)
				}
			}
			float, err := floatActivations(acts)
			if err != nil {
				return fmt.Errorf("run: %w", err)
			}
			if err := checkGGUFWeights(ggufWeights); err != nil {
				return fmt.Errorf("run: %w", err)
			}
			var log io.Writer
			if progress.IsTerminal(cmd.ErrOrStderr()) && !quiet {
				log = cmd.ErrOrStderr()
			}
			m, err := openModel(modelPath, openOptions{Tokenizer: tokPath, Threads: threads, Mode: mode, HugePages: hugePages, NoCompile: noCompile,
				Compile: compile.Options{ARLens: []int{arLen}, Ctx: ctx, ClampCtx: true, KV: kv, FloatActivations: float, GGUFWeights: ggufWeights,
					MMProj: images.mmproj, VisionWeights: images.visionWeights, VisionBuckets: images.visionBuckets}, Log: log})
			if err != nil {
				return err
			}
			defer m.Close()
			if m.Tokenizer() == nil {
				return fmt.Errorf("%s has no tokenizer: pass --tokenizer <file>", modelPath)
			}
			if templatePath != "" {
				if err := load.SetChatTemplate(m, templatePath); err != nil {
					return err
				}
			}
			p = applyGenerationDefaults(cmd, p, m.GenerationDefaults())
			if len(images.files) > 0 {
				return runWithImages(cmd, m, imageRun{modelPath: modelPath, prompt: prompt, system: system, images: *images, ctx: ctx, threads: threads, useChat: useChat, asJSON: asJSON,
					req: aotlm.Request{MaxTokens: n, Sampling: p, IgnoreEOS: ignoreEOS, Stop: stops}})
			}
			s, err := m.NewSession(min(ctx, m.Info().Context))
			if err != nil {
				return err
			}
			defer s.Close()
			if p.RepeatLastN == -1 {
				p.RepeatLastN = s.Context()
			}
			req := aotlm.Request{Prompt: prompt, MaxTokens: n, PromptOnly: n == 0, Sampling: p, IgnoreEOS: ignoreEOS, Stop: stops}
			if useChat {
				if err := chatPrompt(&req, system, m); err != nil {
					return err
				}
			}
			// refuse before anything is echoed
			if err := p.Validate(); err != nil {
				return err
			}
			if req.IDs, err = m.Encode(req.Prompt, req.Raw); err != nil {
				return err
			}
			if len(req.IDs) > s.Context() {
				return fmt.Errorf("%w: %d prompt tokens, context %d", aotlm.ErrPromptTooLong, len(req.IDs), s.Context())
			}
			defer dec.close()
			if req.Strategy, err = dec.strategy(m, threads, s.Context()); err != nil {
				return err
			}
			out := &lineTracker{w: cmd.OutOrStdout()}
			var onToken func(aotlm.Token) error
			if !asJSON {
				if !useChat {
					if _, err := io.WriteString(out, prompt); err != nil {
						return fmt.Errorf("writing output: %w", err)
					}
				}
				onToken = func(t aotlm.Token) error {
					if _, err := io.WriteString(out, t.Text); err != nil {
						return fmt.Errorf("writing output: %w", err)
					}
					return nil
				}
			}
			res, err := s.Generate(cmd.Context(), req, onToken)
			out.endLine() // the text ends its line before any message on stderr
			if err != nil {
				return err
			}
			rep := runReport{PromptIDs: res.PromptIDs, IDs: res.IDs, Text: res.Text, StopReason: res.StopReason,
				TTFTMs: float64(res.TTFT.Microseconds()) / 1000, PrefillTokS: res.PrefillTokS(), DecodeTokS: res.DecodeTokS(), Seed: p.Seed, Decoding: decodingReport(res.Decoding)}
			if asJSON {
				return json.NewEncoder(out).Encode(rep)
			}
			if quiet {
				return nil
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "prompt %d tokens, %.1f tok/s; generated %d tokens, %.1f tok/s; first token after %.1f ms (%s)\n",
				len(rep.PromptIDs), rep.PrefillTokS, len(rep.IDs), rep.DecodeTokS, rep.TTFTMs, rep.StopReason)
			if res.Decoding != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), res.Decoding)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&modelPath, "model", "m", "", "model file, folder or Hub repository org/name[:QUANT] (or the argument; default: the built-in demo model)")
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer file or folder, for checkpoints without one")
	f.StringVar(&mode, "mode", "hybrid", "prefill of a compiled artifact: hybrid (AR-N passes) or kv (one token at a time)")
	f.BoolVar(&noCompile, "no-compile", false, "run an uncompiled model through the graph interpreter instead of compiling it into the cache")
	f.IntVar(&arLen, "ar-len", load.ARLen, "prompt pass length when compiling")
	f.StringVar(&kv, "kv", load.KV, "KV cache storage when compiling: f32, f16 or u8")
	f.StringVar(&acts, "activations", "int8", activationsHelp)
	f.StringVar(&ggufWeights, "gguf-weights", compile.GGUFNative, ggufWeightsHelp)
	f.StringVarP(&prompt, "prompt", "p", "", "prompt text")
	f.StringVarP(&promptFile, "file", "f", "", "read the prompt from a file")
	f.IntVarP(&n, "n-predict", "n", 128, "number of tokens to generate (-1: until EOS or the context is full)")
	f.IntVarP(&threads, "threads", "t", runtime.GOMAXPROCS(0), "threads")
	f.BoolVar(&hugePages, "hugepages", false, hugePagesUsage)
	f.IntVarP(&ctx, "ctx", "c", load.Ctx, "context length (capped at the model's)")
	addSamplingFlags(f, &p, &seed)
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of streaming text")
	f.BoolVar(&useChat, "chat", false, "wrap the prompt as a user turn in the model's chat template")
	f.StringVar(&system, "system", "", "system message, with --chat")
	f.BoolVar(&verify, "verify", false, "check every checksum of a compiled artifact (.aot), weights included, before running")
	f.BoolVar(&ignoreEOS, "ignore-eos", false, "keep generating past the end-of-sequence token")
	f.StringArrayVar(&stops, "stop", nil, "a string that ends generation (repeatable)")
	images = addImageFlags(f)
	f.StringVar(&templatePath, "chat-template", "", "a chat template (.jinja, tokenizer_config.json or GGUF) replacing the model's, with --chat")
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
	Decoding *decodingStats `json:"decoding,omitempty"`
}

// chatPrompt renders the prompt as one user turn (after an optional system
// turn) with the model's chat template, and stops at the template's end
// of turn.
func chatPrompt(req *aotlm.Request, system string, m *aotlm.Model) error {
	if !m.HasChatTemplate() {
		return fmt.Errorf("%w: pass --chat-template <file>", aotlm.ErrNoChatTemplate)
	}
	var msgs []aotlm.Message
	if system != "" {
		msgs = append(msgs, aotlm.Message{Role: "system", Content: system})
	}
	msgs = append(msgs, aotlm.Message{Role: "user", Content: req.Prompt})
	text, err := m.RenderChat(msgs, aotlm.RenderOptions{})
	if err != nil {
		return err
	}
	req.Prompt, req.Raw = text, true
	req.StopIDs = append(req.StopIDs, m.EndOfTurnIDs()...)
	return nil
}

// applyGenerationDefaults uses the model's own generation defaults (its
// generation_config.json, kept in the artifact) for sampling flags the user
// did not set.
func applyGenerationDefaults(cmd *cobra.Command, p aotlm.Sampling, g aotlm.GenerationDefaults) aotlm.Sampling {
	set := cmd.Flags().Changed
	return g.Apply(p, aotlm.SamplingSet{Temperature: set("temp"), TopP: set("top-p"), TopK: set("top-k"),
		MinP: set("min-p"), RepeatPenalty: set("repeat-penalty")})
}
