package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/bench"
	"github.com/aotlm/aotlm/internal/engine"
)

func newInspectCmd() *cobra.Command {
	var asJSON, verify bool
	cmd := &cobra.Command{
		Use:   "inspect MODEL.aot",
		Short: "Print a compiled artifact's manifest and where its bytes go",
		Long: `Print a compiled artifact's manifest (architecture, hyper-parameters,
provenance, tokenizer, plans, context, weights layout) and its size
breakdown: bytes per tensor class (dtype/layout), per section, the KV cache a
session allocates (layers x ctx x kv cols x 2 x element size), the arena of
every plan, and the file.

Every open checks the checksums of all sections but the weights; --verify
also reads every weight byte and checks theirs, then reads every weight
back (dequantizing quantized rows) and reports any NaN or infinity, with
a non-zero exit.`,
		Example: `  aotlm inspect stories.aot
  aotlm inspect stories.aot --verify --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := bench.DescribeFile(args[0], verify)
			if err != nil {
				return err
			}
			var finite error
			if verify {
				finite = checkFinite(args[0])
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
	return cmd
}

// checkFinite opens the artifact at path and reads every weight back,
// returning an error naming the first NaN or infinity.
func checkFinite(path string) error {
	e, err := engine.Open(path)
	if err != nil {
		return err
	}
	defer e.Close()
	if err := e.CheckFinite(); err != nil {
		return fmt.Errorf("inspect: %s: %w", path, err)
	}
	return nil
}
