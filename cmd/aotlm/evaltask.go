package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/internal/score"
)

func newEvalCmd() *cobra.Command {
	var (
		modelPath, tokPath, task, dataPath   string
		phaseList, floatPath, artifact, acts string
		ctx, limit, threads                  int
		asJSON                               bool
	)
	cmd := &cobra.Command{
		Use:   "eval -m MODEL --task lambada|hellaswag|multiple-choice --data FILE",
		Short: "Score a model on a benchmark task",
		Long:  help("eval"),
		Example: `  aotlm eval -m stories260K.gguf --task lambada --data lambada_test.jsonl --limit 500
  aotlm eval -m q-w4/ --task hellaswag --data hellaswag_val_full.txt --json
  aotlm eval -m model.aot --task multiple-choice --data arc-challenge-validation.bin
  aotlm eval -m q-w4/ --task lambada --data lambada_test.jsonl --phases float,qdq,artifact`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if modelPath == "" || dataPath == "" {
				return fmt.Errorf("eval: pass -m <model> and --data <task file>")
			}
			if !slices.Contains(score.Tasks, task) {
				return fmt.Errorf("eval: --task %q: want lambada, hellaswag or multiple-choice", task)
			}
			if limit < 0 {
				return fmt.Errorf("eval: --limit %d is negative", limit)
			}
			f, err := load.OpenText(dataPath, "task file")
			if err != nil {
				return fmt.Errorf("eval: %w", err)
			}
			defer f.Close()
			out := cmd.OutOrStdout()
			if phaseList != "" {
				if task != "lambada" {
					return fmt.Errorf("eval: --phases applies to --task lambada only")
				}
				if acts != "int8" && acts != "float" {
					return fmt.Errorf("eval: --activations %q: want int8 or float", acts)
				}
				ps, err := score.ParsePhases(phaseList)
				if err != nil {
					return err
				}
				return runLambadaPhases(out, f, limit, score.PhaseOptions{Model: modelPath, Float: floatPath,
					Artifact: artifact, Tokenizer: tokPath, Activations: acts, Phases: ps, Ctx: ctx, Threads: threads}, asJSON)
			}
			res, err := score.Task(cmd.Context(), score.Model{Path: modelPath, Tokenizer: tokPath, Threads: threads}, task, f, limit, ctx)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(out).Encode(score.TaskJSON(task, res))
			}
			return score.WriteTask(out, task, res)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&modelPath, "model", "m", "", "model file or folder (required)")
	fl.StringVar(&tokPath, "tokenizer", "", "tokenizer file or folder, for checkpoints without one")
	fl.StringVar(&task, "task", "", "lambada, hellaswag or multiple-choice (required)")
	fl.StringVarP(&dataPath, "data", "f", "", "task file (required)")
	fl.IntVarP(&ctx, "ctx", "c", 0, "context positions (0: the model's)")
	fl.IntVar(&limit, "limit", 0, "score only the first N items (0: all)")
	fl.IntVarP(&threads, "threads", "t", runtime.GOMAXPROCS(0), "threads")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object")
	fl.StringVar(&phaseList, "phases", "", "lambada only: score several phases of a quantized folder in one run: float,qdq,npu,artifact")
	fl.StringVar(&floatPath, "float", "", "with --phases: the float checkpoint (default: the quantized folder's source)")
	fl.StringVar(&artifact, "artifact", "", "with --phases: the compiled artifact (default: compile -m now)")
	fl.StringVar(&acts, "activations", "int8", "with --phases: "+activationsHelp)
	return cmd
}
