package main

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/bench"
)

func newTuneCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tune",
		Short: "Time the kernels' decode walks on this CPU and store the fastest",
		Long: `Time each walk of the one-token products over the weights' rows (a probe of
under a second over 128 MB of memory), keep the fastest and store it in the
cache folder ($AOTLM_CACHE, default the user cache folder), where every
later load reads it. Compiling a model into the cache tunes once per
machine; opening a model never times anything. $AOTLM_KERNEL_TUNE set to a
walk's name or "off" overrides the stored choice.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := bench.Retune()
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"cpu": res.CPU, "walk": res.Walk, "gbps": res.GBps, "stored": res.Written})
			}
			w := cmd.OutOrStdout()
			walks := make([]string, 0, len(res.GBps))
			for name := range res.GBps {
				walks = append(walks, name)
			}
			sort.Strings(walks)
			for _, name := range walks {
				fmt.Fprintf(w, "%-22s %6.1f GB/s\n", name, res.GBps[name])
			}
			fmt.Fprintf(w, "decode walk: %s (%s)\n", res.Walk, res.CPU)
			if res.Written != "" {
				fmt.Fprintf(w, "stored in %s\n", res.Written)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}
