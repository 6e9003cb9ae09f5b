package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/score"
)

func newLogitsCmd() *cobra.Command {
	var (
		path, mode string
		ids        []int
		threads    int
		asJSON     bool
	)
	cmd := &cobra.Command{
		Use:   "logits -m MODEL --ids ID,ID,... [flags]",
		Short: "Print the logits of every position of a token sequence",
		Long: `Print the logits of every position of a token sequence.

-m takes a model (Hugging Face folder, GGUF, llama2.c file) or a compiled
artifact. The ids are fed from position 0; row i of the output holds the
logits after ids[0..i]. --mode chooses the prefill of an artifact (hybrid or
kv); an artifact computes one row per pass, so its rows come from the AR-1
plan either way. With --json one object {"logits": [[V floats] per position]}
is printed; otherwise the top id of each position.`,
		Example: `  aotlm logits -m Qwen3-0.6B --ids 5,17,42 --json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if path == "" {
				return fmt.Errorf("no model: pass -m <model or artifact>")
			}
			if len(ids) == 0 {
				return fmt.Errorf("no ids: pass --ids 5,17,42")
			}
			if mode != "hybrid" && mode != "kv" {
				return fmt.Errorf("--mode %q is not hybrid or kv", mode)
			}
			rows, err := score.Logits(cmd.Context(), score.Model{Path: path, Threads: threads, Mode: mode}, ids)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(out).Encode(map[string]any{"logits": rows})
			}
			for i, row := range rows {
				best := 0
				for j, v := range row {
					if v > row[best] {
						best = j
					}
				}
				fmt.Fprintf(out, "%5d  id %6d  top %6d (%.4f)\n", i, ids[i], best, row[best])
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&path, "model", "m", "", "model folder or file, or a compiled artifact (required)")
	f.IntSliceVar(&ids, "ids", nil, "token ids, comma-separated (required)")
	f.StringVar(&mode, "mode", "hybrid", "prefill of an artifact: hybrid or kv")
	f.IntVarP(&threads, "threads", "t", 1, "threads")
	f.BoolVar(&asJSON, "json", false, `print one JSON object {"logits": [[...] per position]}`)
	return cmd
}
