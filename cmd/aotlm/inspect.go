package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/bench"
	"github.com/aotlm/aotlm/internal/load"
)

func newInspectCmd() *cobra.Command {
	var asJSON, verify bool
	stateBudget := load.StateBudget
	cmd := &cobra.Command{
		Use:   "inspect MODEL.aot",
		Short: "Print a compiled artifact's manifest and where its bytes go",
		Long: `Print a compiled artifact's manifest (architecture, hyper-parameters,
provenance, tokenizer, plans, context, weights layout) and its size
breakdown: bytes per tensor class (dtype/layout), per section, the KV cache a
session allocates (layers x ctx x kv cols x 2 x element size, a
sliding-window layer's ring in place of ctx), the arena of every plan, and
the file. A model with recurrent state also shows the state cache a
session keeps within --state-budget (as run, chat and serve take it).

Every open checks the checksums of all sections but the weights; --verify
also reads every weight byte and checks theirs, then reads every weight
back (dequantizing quantized rows) and reports any NaN or infinity, with
a non-zero exit.`,
		Example: `  aotlm inspect stories.aot
  aotlm inspect stories.aot --verify --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := bench.DescribeFileWith(args[0], bench.DescribeOptions{Verify: verify, StateBudget: int64(stateBudget)})
			if err != nil {
				return err
			}
			var finite error
			if verify {
				finite = bench.CheckFinite(args[0])
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := json.NewEncoder(out).Encode(info); err != nil {
					return err
				}
				return finite
			}
			info.Path = args[0]
			if err := info.WriteText(out); err != nil {
				return err
			}
			if finite != nil {
				return finite
			}
			if verify {
				fmt.Fprintln(out, "verified: every section's checksum matches, weights included, and every weight is finite")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the manifest with a \"sizes\" object as one JSON object")
	cmd.Flags().BoolVar(&verify, "verify", false, "also check the weights checksum and that every weight is finite (reads every byte)")
	cmd.Flags().Var(&stateBudget, "state-budget", stateBudgetUsage)
	return cmd
}
