package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/chat"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/model"
	"github.com/aotlm/aotlm/internal/sample"
	"github.com/aotlm/aotlm/internal/textgen"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

func newRunCmd() *cobra.Command {
	var (
		modelPath, tokPath, prompt, promptFile string
		n, threads, ctx                        int
		p                                      sample.Params
		seed                                   int64
		asJSON, ignoreEOS, useChat, verify     bool
		system, mode, kv, acts                 string
		arLen                                  int
		noCompile                              bool
	)
	cmd := &cobra.Command{
		Use:   "run [MODEL] -m MODEL -p PROMPT",
		Short: "Generate text from a prompt",
		Long: `Generate text from a prompt, streaming it to stdout as it is produced.

MODEL is a compiled artifact (.aot, from aotlm compile), a GGUF file, a
llama2.c checkpoint (.bin, with --tokenizer), a Hugging Face folder
(config.json + model.safetensors + tokenizer files), or a quantized folder
(from aotlm quantize), or a Hugging Face Hub repository, org/name[@rev][:QUANT],
pulled into the Hugging Face cache first (see aotlm pull). MODEL may be
given with -m or as the argument. A model that is not an artifact is compiled into the
cache first ($AOTLM_CACHE, default the user cache folder), once per model
and options; --no-compile runs it through the graph interpreter instead.
--temp 0 decodes greedily; --seed makes sampling reproducible.`,
		Example: `  aotlm run -m stories260K.gguf -p "Once upon a time" -n 64
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
			if modelPath == "" {
				return fmt.Errorf("no model: pass -m <model file, folder or org/name>")
			}
			var err error
			if modelPath, err = resolveModelArg(modelPath, cmd.ErrOrStderr()); err != nil {
				return err
			}
			if promptFile != "" {
				b, err := os.ReadFile(promptFile)
				if err != nil {
					return fmt.Errorf("prompt file: %w", err)
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
				a, err := artifact.Open(modelPath, artifact.OpenOptions{Verify: true})
				if err != nil {
					return fmt.Errorf("--verify: %w", err)
				}
				a.Close()
			}
			runPath, runTok := modelPath, tokPath
			if !noCompile {
				var log io.Writer
				if isTerminal(cmd.ErrOrStderr()) {
					log = cmd.ErrOrStderr()
				}
				float, err := floatActivations(acts)
				if err != nil {
					return fmt.Errorf("run: %w", err)
				}
				compiled, err := model.CompileCached(modelPath, compile.Options{ARLens: []int{arLen},
					Ctx: ctx, ClampCtx: true, Tokenizer: tokPath, KV: kv, FloatActivations: float}, log)
				if err != nil {
					return err
				}
				runPath, runTok = compiled, ""
			}
			m, err := model.Open(runPath, model.Options{Tokenizer: runTok, Threads: threads, Mode: mode})
			if err != nil {
				return err
			}
			if m.Tokenizer == nil && runPath != modelPath {
				// artifacts store tokenizer.json, SentencePiece, llama2.c and
				// GGUF vocabularies; a folder's other layouts load from it
				if st, err := os.Stat(modelPath); err == nil && st.IsDir() {
					if tok, err := model.OpenTokenizer(modelPath); err == nil {
						m.Tokenizer = tok
					}
				}
			}
			applyGenerationDefaults(cmd, &p, m.Generation)
			s, err := m.NewSession(min(ctx, m.Config.Context))
			if err != nil {
				return err
			}
			req := textgen.Request{Prompt: prompt, MaxTokens: n, Sampling: p, IgnoreEOS: ignoreEOS}
			if useChat {
				if err := chatPrompt(&req, modelPath, system, m); err != nil {
					return err
				}
			}
			if !asJSON {
				req.Stream, req.Echo = cmd.OutOrStdout(), !useChat
			}
			rep, err := textgen.Run(m, m.Tokenizer, s, req)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
			}
			fmt.Fprintln(cmd.OutOrStdout())
			fmt.Fprintf(cmd.ErrOrStderr(), "prompt %d tokens, %.1f tok/s; generated %d tokens, %.1f tok/s; first token after %.1f ms (%s)\n",
				len(rep.PromptIDs), rep.PrefillTokS, len(rep.IDs), rep.DecodeTokS, rep.TTFTMs, rep.StopReason)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&modelPath, "model", "m", "", "model file, folder or Hub repository org/name[:QUANT] (or the argument)")
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer file or folder, for checkpoints without one")
	f.StringVar(&mode, "mode", "hybrid", "prefill of a compiled artifact: hybrid (AR-N passes) or kv (one token at a time)")
	f.BoolVar(&noCompile, "no-compile", false, "run an uncompiled model through the graph interpreter instead of compiling it into the cache")
	f.IntVar(&arLen, "ar-len", 32, "prompt pass length when compiling")
	f.StringVar(&kv, "kv", "f32", "KV cache storage when compiling: f32, f16 or u8")
	f.StringVar(&acts, "activations", "int8", activationsHelp)
	f.StringVarP(&prompt, "prompt", "p", "", "prompt text")
	f.StringVarP(&promptFile, "file", "f", "", "read the prompt from a file")
	f.IntVarP(&n, "n-predict", "n", 128, "number of tokens to generate (-1: until EOS or the context is full)")
	f.IntVarP(&threads, "threads", "t", runtime.GOMAXPROCS(0), "threads")
	f.IntVarP(&ctx, "ctx", "c", 4096, "context length (capped at the model's)")
	f.Float32Var(&p.Temperature, "temp", 0.8, "temperature; 0 is greedy")
	f.IntVar(&p.TopK, "top-k", 40, "keep the K most likely tokens (0: all)")
	f.Float32Var(&p.TopP, "top-p", 0.95, "nucleus sampling mass (1: off)")
	f.Float32Var(&p.MinP, "min-p", 0.05, "drop tokens below this fraction of the best one's probability (0: off)")
	f.Float32Var(&p.RepeatPenalty, "repeat-penalty", 1, "penalty for recently generated tokens (1: off)")
	f.IntVar(&p.RepeatLastN, "repeat-last-n", 64, "how many recent tokens the penalty considers")
	f.Int64Var(&seed, "seed", -1, "sampling seed (-1: random)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object instead of streaming text")
	f.BoolVar(&useChat, "chat", false, "wrap the prompt as a user turn in the model's chat template")
	f.StringVar(&system, "system", "", "system message, with --chat")
	f.BoolVar(&verify, "verify", false, "check every checksum of a compiled artifact (.aot), weights included, before running")
	f.BoolVar(&ignoreEOS, "ignore-eos", false, "keep generating past the end-of-sequence token")
	return cmd
}

// chatPrompt renders the prompt as one user turn (after an optional system
// turn) with the model's chat template, and stops at the template's EOS.
func chatPrompt(req *textgen.Request, modelPath, system string, m *model.Model) error {
	tpl, sp, err := model.ChatTemplate(modelPath)
	if err != nil {
		return err
	}
	var msgs []chat.Message
	if system != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: system})
	}
	msgs = append(msgs, chat.Message{Role: "user", Content: req.Prompt})
	text, err := tpl.Render(msgs, chat.Options{AddGenerationPrompt: true, BOSToken: sp.BOS, EOSToken: sp.EOS})
	if err != nil {
		return err
	}
	req.Prompt, req.Raw = text, true
	if sp.EOS != "" && m.Tokenizer != nil {
		if ids := m.Tokenizer.Encode(sp.EOS, tokenizer.EncodeOptions{ParseSpecial: true}); len(ids) == 1 {
			req.ExtraStop = append(req.ExtraStop, ids[0])
		}
	}
	return nil
}

// applyGenerationDefaults uses the model's own generation defaults (its
// generation_config.json, kept in the artifact) for sampling flags the user
// did not set.
func applyGenerationDefaults(cmd *cobra.Command, p *sample.Params, g map[string]any) {
	num := func(k string) (float64, bool) {
		v, ok := g[k].(float64)
		return v, ok
	}
	set := func(flag, key string, apply func(float64)) {
		if v, ok := num(key); ok && !cmd.Flags().Changed(flag) {
			apply(v)
		}
	}
	if ds, ok := g["do_sample"].(bool); ok && !ds && !cmd.Flags().Changed("temp") {
		p.Temperature = 0
		return
	}
	set("temp", "temperature", func(v float64) { p.Temperature = float32(v) })
	set("top-p", "top_p", func(v float64) { p.TopP = float32(v) })
	set("top-k", "top_k", func(v float64) { p.TopK = int(v) })
	set("min-p", "min_p", func(v float64) { p.MinP = float32(v) })
	set("repeat-penalty", "repetition_penalty", func(v float64) { p.RepeatPenalty = float32(v) })
}
