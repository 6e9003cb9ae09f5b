package eval

import (
	"errors"
	"fmt"
	"math"
)

// PhaseResult is the perplexity of one phase (a way of running the same
// model: float, simulated quantization, compiled artifact) and its
// distance from the first phase, the base, over the same scored tokens, as
// llama.cpp's llama-perplexity --kl-divergence defines them:
//
//	KL(t)  = sum_v p_base(v|t) * (log p_base(v|t) - log p(v|t))
//	Top1   = fraction of tokens where argmax p == argmax p_base ("same top p")
//
// KL and Top1 are 0 and 1 for the base itself.
type PhaseResult struct {
	Result
	KL       float64 // mean KL divergence from the base, in nats
	KLStdErr float64 // standard error of KL (0 if undefined)
	MaxKL    float64 // largest per-token KL
	Top1     float64 // fraction of tokens whose top-1 token is the base's
}

// window is one chunk or window of a scoring rule: the ids to run from an
// empty cache, and which rows score which tokens.
type window struct {
	ids     []int
	rows    []int // row i predicts targets[i]
	targets []int
}

// windows lists the chunks (LlamaCpp) or windows (Sliding) Perplexity
// evaluates, in order.
func windows(tokens []int, opts Options) ([]window, Method, error) {
	m, err := opts.method()
	if err != nil {
		return nil, "", err
	}
	ctx := opts.Ctx
	var out []window
	if m == LlamaCpp {
		if len(tokens)/2 < ctx {
			return nil, m, &TooShortError{Tokens: len(tokens), Need: 2 * ctx, Ctx: ctx, Method: LlamaCpp}
		}
		n := len(tokens) / ctx
		if opts.MaxChunks > 0 {
			n = min(n, opts.MaxChunks)
		}
		for c := range n {
			start := c * ctx
			w := window{ids: append([]int(nil), tokens[start:start+ctx]...)}
			if opts.BOS >= 0 {
				w.ids[0] = opts.BOS
			}
			for i := ctx / 2; i < ctx-1; i++ {
				w.rows, w.targets = append(w.rows, i), append(w.targets, tokens[start+i+1])
			}
			out = append(out, w)
		}
		return out, m, nil
	}
	n := len(tokens)
	if n < 2 {
		return nil, m, &TooShortError{Tokens: n, Need: 2, Ctx: ctx, Method: Sliding}
	}
	total := slidingWindows(n, ctx, opts.Stride)
	if opts.MaxChunks > 0 {
		total = min(total, opts.MaxChunks)
	}
	prevEnd := 0
	for k := range total {
		begin := k * opts.Stride
		end := begin + min(ctx, n-begin)
		w := window{ids: append([]int(nil), tokens[begin:end]...)}
		for t := max(prevEnd, begin+1); t < end; t++ {
			w.rows, w.targets = append(w.rows, t-1-begin), append(w.targets, tokens[t])
		}
		prevEnd = end
		out = append(out, w)
	}
	return out, m, nil
}

// PerplexityPhases scores tokens with every session in turn, chunk by
// chunk, under the rule of opts, and compares each session's distribution
// with the first one's. Progress, if set, gets the first phase's running
// perplexity. Each result's perplexity equals what Perplexity gives for
// that session alone.
func PerplexityPhases(sessions []Session, tokens []int, opts Options) ([]PhaseResult, error) {
	if len(sessions) == 0 {
		return nil, errors.New("eval: no phases to score")
	}
	for _, s := range sessions {
		if c, ok := s.(interface{ Context() int }); ok && opts.Ctx > c.Context() {
			return nil, fmt.Errorf("%w: ctx %d exceeds the model's context %d", ErrBadOptions, opts.Ctx, c.Context())
		}
	}
	ws, m, err := windows(tokens, opts)
	if err != nil {
		return nil, err
	}
	nll := make([]accum, len(sessions))
	kl := make([]accum, len(sessions))
	maxKL := make([]float64, len(sessions))
	same := make([]int, len(sessions))
	logp := make([][]float64, len(sessions))
	for k, w := range ws {
		rows := make([][][]float32, len(sessions))
		for p, s := range sessions {
			if rows[p], err = logits(s, w.ids); err != nil {
				return nil, fmt.Errorf("eval: phase %d, chunk %d: %w", p+1, k+1, err)
			}
		}
		for j, r := range w.rows {
			for p := range sessions {
				row := rows[p][r]
				if len(row) != len(rows[0][r]) {
					return nil, fmt.Errorf("eval: phase %d gives %d logits, phase 1 %d", p+1, len(row), len(rows[0][r]))
				}
				if err := nll[p].add(row, w.targets[j]); err != nil {
					return nil, fmt.Errorf("eval: phase %d, chunk %d, position %d: %w", p+1, k+1, r, err)
				}
				logp[p] = logSoftmax(logp[p], row)
			}
			top := argmax64(logp[0])
			for p := range sessions {
				d := klDiv(logp[0], logp[p])
				kl[p].addValue(d)
				maxKL[p] = max(maxKL[p], d)
				if argmax64(logp[p]) == top {
					same[p]++
				}
			}
		}
		if opts.Progress != nil {
			opts.Progress(k+1, len(ws), nll[0].ppl())
		}
	}
	out := make([]PhaseResult, len(sessions))
	for p := range sessions {
		r := PhaseResult{Result: nll[p].result(len(ws), opts.Ctx, m), MaxKL: maxKL[p]}
		kr := kl[p].result(len(ws), opts.Ctx, m)
		r.KL = kr.NLL
		if kl[p].n > 1 {
			r.KLStdErr = math.Sqrt(kl[p].m2 / float64(kl[p].n) / float64(kl[p].n-1))
		}
		if kl[p].n > 0 {
			r.Top1 = float64(same[p]) / float64(kl[p].n)
		}
		out[p] = r
	}
	return out, nil
}

// addValue adds one value to the running sums (as add does with an NLL).
func (a *accum) addValue(v float64) {
	a.sum += v
	a.n++
	d := v - a.mean
	a.mean += d / float64(a.n)
	a.m2 += d * (v - a.mean)
}

// logSoftmax writes log softmax(row) into dst (reused when large enough),
// in float64.
func logSoftmax(dst []float64, row []float32) []float64 {
	if cap(dst) < len(row) {
		dst = make([]float64, len(row))
	}
	dst = dst[:len(row)]
	m := math.Inf(-1)
	for _, v := range row {
		m = max(m, float64(v))
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v) - m)
	}
	lse := m + math.Log(sum)
	for i, v := range row {
		dst[i] = float64(v) - lse
	}
	return dst
}

// klDiv returns sum_v exp(base[v]) * (base[v] - other[v]) for two
// log-distributions.
func klDiv(base, other []float64) float64 {
	var s float64
	for v, lb := range base {
		if lb == math.Inf(-1) {
			continue
		}
		s += math.Exp(lb) * (lb - other[v])
	}
	return max(s, 0)
}

// argmax64 returns the index of the largest value (the first of ties).
func argmax64(v []float64) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}
