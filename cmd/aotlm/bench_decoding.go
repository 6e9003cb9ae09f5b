package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/bench"
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
	data, err := os.ReadFile(b.prompts)
	if err != nil {
		return fmt.Errorf("bench: prompts: %w", err)
	}
	var prompts []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			prompts = append(prompts, strings.ReplaceAll(l, `\n`, "\n"))
		}
	}
	if len(prompts) == 0 {
		return fmt.Errorf("bench: %s holds no prompt", b.prompts)
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
	st, err := b.strategy(m, threads, s.Context())
	if err != nil {
		return err
	}
	rep := decodingBench{Strategy: st.Name(), Tokens: n}
	for _, p := range prompts {
		row := decodingBenchRow{Prompt: p}
		var plain, spec, plainCPU, specCPU []float64
		for range max(reps, 1) {
			for _, strat := range []bool{false, true} {
				req := aotlm.Request{Prompt: p, MaxTokens: n, IgnoreEOS: true, Sampling: aotlm.Sampling{}}
				if strat {
					req.Strategy = st
				}
				if err := s.Reset(); err != nil {
					return err
				}
				c0 := bench.CPUTime()
				res, err := s.Generate(cmd.Context(), req, nil)
				if err != nil {
					return err
				}
				cpu := (bench.CPUTime() - c0).Seconds()
				if !strat {
					plain, row.ids = append(plain, res.DecodeTokS()), res.IDs
					plainCPU = append(plainCPU, cpu)
					continue
				}
				spec = append(spec, res.DecodeTokS())
				specCPU = append(specCPU, cpu)
				if !slices.Equal(res.IDs, row.ids) {
					return fmt.Errorf("bench: %s gave other ids than plain greedy decoding on %q", st.Name(), p)
				}
				d := res.Decoding
				row.TokensPerPass, row.Acceptance = d.TokensPerPass(), d.AcceptanceRate()
			}
		}
		row.PlainTokS, row.TokS = medianOf(plain), medianOf(spec)
		row.Speedup = row.TokS / row.PlainTokS
		if c := medianOf(specCPU); c > 0 {
			row.CPUSpeedup = medianOf(plainCPU) / c
		}
		rep.Rows = append(rep.Rows, row)
	}
	if asJSON {
		return json.NewEncoder(out).Encode(rep)
	}
	return rep.write(out)
}

func medianOf(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// decodingBench is bench's report of a strategy against plain decoding.
type decodingBench struct {
	Strategy string             `json:"strategy"`
	Tokens   int                `json:"tokens"`
	Rows     []decodingBenchRow `json:"prompts"`
}

type decodingBenchRow struct {
	Prompt    string  `json:"prompt"`
	PlainTokS float64 `json:"plain_tok_s"`
	TokS      float64 `json:"tok_s"`
	Speedup   float64 `json:"speedup"`
	// CPUSpeedup is the same ratio in process CPU time over the whole
	// request (prompt pass included): steadier than wall clock on a busy
	// machine when one thread runs (0 where CPU time is not read).
	CPUSpeedup    float64 `json:"cpu_speedup,omitempty"`
	TokensPerPass float64 `json:"tokens_per_pass"`
	Acceptance    float64 `json:"acceptance_rate"`
	ids           []int
}

func (r decodingBench) write(out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "prompt\tplain tok/s\t%s tok/s\tspeedup\tcpu speedup\ttokens/pass\taccepted\n", r.Strategy)
	for _, x := range r.Rows {
		p := strings.ReplaceAll(x.Prompt, "\n", " ")
		if len(p) > 40 {
			p = p[:37] + "..."
		}
		fmt.Fprintf(w, "%s\t%.1f\t%.1f\t%.2fx\t%.2fx\t%.2f\t%.0f%%\n", p, x.PlainTokS, x.TokS, x.Speedup, x.CPUSpeedup, x.TokensPerPass, 100*x.Acceptance)
	}
	return w.Flush()
}
