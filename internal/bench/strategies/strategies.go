// Package strategies measures decoding strategies (lookahead, prompt
// lookup, a draft model) against plain greedy decoding of the same
// prompts in the runtime's sessions, checking that both give the same ids.
package strategies

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/bench"
	"github.com/aotlm/aotlm/internal/userfile"
)

// ReadPrompts reads a text file of prompts, one a line (\n in a line is
// a newline); blank lines are skipped.
func ReadPrompts(path string) ([]string, error) {
	data, err := userfile.ReadFile(path, userfile.Text.Named("prompts file"))
	if err != nil {
		return nil, fmt.Errorf("bench: prompts: %w", err)
	}
	var prompts []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			prompts = append(prompts, strings.ReplaceAll(l, `\n`, "\n"))
		}
	}
	if len(prompts) == 0 {
		return nil, fmt.Errorf("bench: %s holds no prompt", path)
	}
	return prompts, nil
}

// Report is a strategy's measure against plain decoding, prompt by prompt.
type Report struct {
	Strategy string `json:"strategy"`
	Tokens   int    `json:"tokens"`
	Rows     []Row  `json:"prompts"`
}

// Row is one prompt's measure: decode rates (medians over the
// repetitions) and the strategy's passes.
type Row struct {
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

// Compare decodes n tokens of each prompt in s greedily, plainly and with
// st in turn, reps times (at least once), and reports the median rates.
// A strategy that gives other ids than plain decoding is an error.
func Compare(ctx context.Context, s *aotlm.Session, st *aotlm.Strategy, prompts []string, n, reps int) (*Report, error) {
	rep := &Report{Strategy: st.Name(), Tokens: n}
	for _, p := range prompts {
		row := Row{Prompt: p}
		var plain, spec, plainCPU, specCPU []float64
		for range max(reps, 1) {
			for _, strat := range []bool{false, true} {
				req := aotlm.Request{Prompt: p, MaxTokens: n, IgnoreEOS: true, Sampling: aotlm.Sampling{}}
				if strat {
					req.Strategy = st
				}
				if err := s.Reset(); err != nil {
					return nil, err
				}
				c0 := bench.CPUTime()
				res, err := s.Generate(ctx, req, nil)
				if err != nil {
					return nil, err
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
					return nil, fmt.Errorf("bench: %s gave other ids than plain greedy decoding on %q", st.Name(), p)
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
	return rep, nil
}

func medianOf(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// Write prints the report as a table, a prompt a row.
func (r *Report) Write(out io.Writer) error {
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
