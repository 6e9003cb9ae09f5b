package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/bench"
	"github.com/aotlm/aotlm/internal/bench/strategies"
)

// benchDecodingFlags are bench's flags for decoding strategies: the
// strategy flags of run, prompts to decode, and --verify-rows.
type benchDecodingFlags struct {
	*decodingFlags
	prompts    string
	verifyRows int
}

func addBenchDecodingFlags(cmd *cobra.Command) *benchDecodingFlags {
	b := &benchDecodingFlags{decodingFlags: addDecodingFlags(cmd)}
	f := cmd.Flags()
	f.StringVar(&b.prompts, "prompts", "", "with a strategy: a text file of prompts, one a line (\\n in a line is a newline)")
	f.IntVar(&b.verifyRows, "verify-rows", 0, "time passes of 1..K rows with every row's logits (verify passes) against one decode pass")
	return b
}

// active reports whether bench measures strategies instead of its tests.
func (b *benchDecodingFlags) active() bool {
	return b.verifyRows > 0 || b.mode != "" || b.draft != ""
}

// run measures what the flags ask for on the artifact at path.
func (b *benchDecodingFlags) run(cmd *cobra.Command, path string, threads, n, reps int, asJSON bool) error {
	out := cmd.OutOrStdout()
	if b.verifyRows > 0 {
		rows, dec, err := bench.VerifyPasses(path, threads, b.verifyRows, max(reps, 5))
		if err != nil {
			return err
		}
		if asJSON {
			return json.NewEncoder(out).Encode(map[string]any{"decode_ms": dec, "passes": rows})
		}
		w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(w, "rows\tms\tvs decode\tcpu ms\tvs decode\t\n")
		for _, r := range rows {
			fmt.Fprintf(w, "%d\t%.2f\t%.2fx\t%.2f\t%.2fx\t\n", r.Rows, r.Ms, r.Ratio, r.CPUMs, r.CPURatio)
		}
		fmt.Fprintf(w, "decode\t%.2f\t1.00x\t%.2f\t1.00x\t\n", dec.Ms, dec.CPUMs)
		return w.Flush()
	}
	if b.prompts == "" {
		what := "--draft"
		if b.mode != "" {
			what = "--mode " + b.mode
		}
		return fmt.Errorf("bench: %s needs --prompts <file of prompts, one a line>", what)
	}
	prompts, err := strategies.ReadPrompts(b.prompts)
	if err != nil {
		return err
	}
	m, err := aotlm.Open(path, aotlm.Options{Threads: threads})
	if err != nil {
		return err
	}
	defer m.Close()
	defer b.close()
	s, err := m.NewSession(0)
	if err != nil {
		return err
	}
	defer s.Close()
	st, err := b.strategy(m, threads, s.Context(), false)
	if err != nil {
		return err
	}
	rep, err := strategies.Compare(cmd.Context(), s, st, prompts, n, reps)
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(out).Encode(rep)
	}
	return rep.Write(out)
}
