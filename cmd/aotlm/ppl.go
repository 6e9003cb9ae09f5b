package main

import (
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/internal/score"
)

func newPplCmd() *cobra.Command {
	var (
		modelPath, tokPath, dataPath   string
		ctx, stride, chunks, threads   int
		asJSON                         bool
		phaseList, floatPath, artifact string
		acts, kvList                   string
	)
	cmd := &cobra.Command{
		Use:   "ppl -m MODEL --data TEXT_FILE",
		Short: "Measure the perplexity of a model over a text",
		Long:  help("ppl"),
		Example: `  aotlm ppl -m stories260K.gguf --data TinyStories-valid-excerpt.txt --ctx 128
  aotlm ppl -m model.gguf -f wiki.test.raw -c 512 --chunks 20 --json
  aotlm ppl -m model.gguf -f wiki.test.raw -c 512 --kv f16,u8,q4`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if modelPath == "" {
				return fmt.Errorf("no model: pass -m <model file or folder>")
			}
			if dataPath == "" {
				return fmt.Errorf("no text: pass --data <text file>")
			}
			text, err := load.ReadText(dataPath, "data file")
			if err != nil {
				return err
			}
			if len(text) == 0 {
				return fmt.Errorf("data file %s is empty", dataPath)
			}
			stderr := cmd.ErrOrStderr()
			opts := score.TextOptions{Ctx: ctx, Stride: stride, Chunks: chunks,
				Progress: func(done, total int, ppl float64) {
					fmt.Fprintf(stderr, "[%d]%.4f,", done, ppl)
					if done == total {
						fmt.Fprintln(stderr)
					}
				}}
			if phaseList != "" {
				list, err := score.ParsePhases(phaseList)
				if err != nil {
					return err
				}
				if _, err := load.FloatActivations(acts); err != nil {
					return err
				}
				return runPhases(cmd.OutOrStdout(), score.PhaseOptions{Model: modelPath, Float: floatPath, Artifact: artifact,
					Tokenizer: tokPath, Activations: acts, Phases: list, Ctx: ctx, Threads: threads}, string(text), opts, asJSON)
			}
			if kvList != "" {
				kv, err := score.ParseKV(kvList)
				if err != nil {
					return err
				}
				res, err := score.KVPhases(score.KVOptions{Model: modelPath, Tokenizer: tokPath, KV: kv, Ctx: ctx, Threads: threads}, string(text), opts)
				if err != nil {
					return err
				}
				if asJSON {
					return json.NewEncoder(cmd.OutOrStdout()).Encode(score.PhasesJSON(kv, res))
				}
				return score.WritePhases(cmd.OutOrStdout(), kv, res)
			}
			r, err := score.Text(cmd.Context(), score.Model{Path: modelPath, Tokenizer: tokPath, Threads: threads}, string(text), opts)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(score.TextJSON(r))
			}
			return score.WriteText(cmd.OutOrStdout(), r, stride)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&modelPath, "model", "m", "", "model file or folder (required)")
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer file or folder, for checkpoints without one")
	f.StringVarP(&dataPath, "data", "f", "", "text file to measure (required)")
	f.IntVarP(&ctx, "ctx", "c", 512, "tokens per chunk (or per window with --stride)")
	f.IntVar(&stride, "stride", 0, "sliding-window rule: start a window every S tokens (0: llama.cpp rule)")
	f.IntVar(&chunks, "chunks", 0, "stop after N chunks or windows (0: all)")
	f.IntVarP(&threads, "threads", "t", runtime.GOMAXPROCS(0), "threads")
	f.BoolVar(&asJSON, "json", false, "print one JSON object {ppl, nll, tokens, ctx, chunks, method}")
	f.StringVar(&phaseList, "phases", "", "score several phases of a quantized folder in one run: float,qdq,npu,artifact")
	f.StringVar(&floatPath, "float", "", "with --phases: the float checkpoint (default: the quantized folder's source)")
	f.StringVar(&artifact, "artifact", "", "with --phases: the compiled artifact (default: compile -m now)")
	f.StringVar(&kvList, "kv", "", "compile -m with each KV cache storage of a list (f32, f16, u8, q4, q4v) and score them; the first is the reference of the KL divergence")
	f.StringVar(&acts, "activations", "int8", "with --phases: "+activationsHelp)
	return cmd
}
