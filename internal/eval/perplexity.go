package eval

import (
	"errors"
	"fmt"
	"math"
)

// Session is what Perplexity needs of a model: empty the cache, then run a
// window of ids from position 0 and return one row of logits per id (row i
// is the distribution of the token after ids[i]). A session that also has
// a Context() int method is checked against Options.Ctx before any work.
type Session interface {
	Reset()
	Logits(ids []int) ([][]float32, error)
}

// Method names a scoring rule.
type Method string

// The scoring rules; see the package documentation.
const (
	// LlamaCpp scores the second half of consecutive Ctx-token chunks, each
	// started with BOS, as llama.cpp's llama-perplexity does.
	LlamaCpp Method = "llama.cpp"
	// Sliding scores every token once with windows of Ctx tokens taken
	// every Stride tokens, as the Hugging Face perplexity guide does.
	Sliding Method = "sliding"
)

// Options configures Perplexity.
type Options struct {
	// Ctx is the number of tokens in one chunk or window.
	Ctx int
	// Method is the scoring rule; "" selects LlamaCpp, or Sliding when
	// Stride is set.
	Method Method
	// Stride is the distance between window starts (Sliding only),
	// 1 <= Stride <= Ctx.
	Stride int
	// MaxChunks stops after that many chunks or windows (0: all).
	MaxChunks int
	// BOS replaces the first token of every chunk (LlamaCpp only, as
	// llama.cpp does when its vocabulary adds a BOS); negative leaves the
	// chunks as they are. Note that the zero value is the id 0.
	BOS int
	// Progress, if set, is called after every chunk or window with the
	// number done, the total, and the perplexity so far.
	Progress func(done, total int, runningPPL float64)
}

// Result is a perplexity measurement.
type Result struct {
	PPL    float64 // exp(NLL)
	NLL    float64 // mean negative log-likelihood per scored token, in nats
	StdErr float64 // standard error of PPL, as llama.cpp's "+/-" (0 if undefined)
	Tokens int     // tokens scored
	Chunks int     // chunks (LlamaCpp) or windows (Sliding) evaluated
	Ctx    int     // tokens per chunk or window
	Method Method
}

// TooShortError reports a token stream too short for the method.
type TooShortError struct {
	Tokens int // tokens in the stream
	Need   int // tokens required
	Ctx    int
	Method Method
}

func (e *TooShortError) Error() string {
	if e.Method == LlamaCpp {
		return fmt.Sprintf("eval: the text tokenizes to only %d tokens; the %s method needs at least %d (2 x ctx %d): use a longer text or a smaller --ctx",
			e.Tokens, e.Method, e.Need, e.Ctx)
	}
	return fmt.Sprintf("eval: the text tokenizes to only %d tokens; the %s method needs at least %d", e.Tokens, e.Method, e.Need)
}

// ErrBadOptions is wrapped by every error about invalid Options.
var ErrBadOptions = errors.New("eval: invalid perplexity options")

// Perplexity runs tokens through s with the rule opts selects and returns
// the perplexity of the scored tokens.
func Perplexity(s Session, tokens []int, opts Options) (Result, error) {
	m, err := opts.method()
	if err != nil {
		return Result{}, err
	}
	if c, ok := s.(interface{ Context() int }); ok && opts.Ctx > c.Context() {
		return Result{}, fmt.Errorf("%w: ctx %d exceeds the model's context %d", ErrBadOptions, opts.Ctx, c.Context())
	}
	switch m {
	case LlamaCpp:
		return llamaCpp(s, tokens, opts)
	default:
		return sliding(s, tokens, opts)
	}
}

// method validates opts and resolves the method.
func (o *Options) method() (Method, error) {
	bad := func(format string, a ...any) (Method, error) {
		return "", fmt.Errorf("%w: "+format, append([]any{ErrBadOptions}, a...)...)
	}
	m := o.Method
	if m == "" {
		m = LlamaCpp
		if o.Stride > 0 {
			m = Sliding
		}
	}
	if o.MaxChunks < 0 {
		return bad("max chunks %d is negative", o.MaxChunks)
	}
	switch m {
	case LlamaCpp:
		if o.Stride != 0 {
			return bad("stride %d applies to the %s method only", o.Stride, Sliding)
		}
		// ctx-ctx/2-1 tokens are scored per chunk: at least one needs ctx >= 3.
		if o.Ctx < 3 {
			return bad("ctx %d is too small: the %s method needs at least 3", o.Ctx, LlamaCpp)
		}
	case Sliding:
		if o.Ctx < 2 {
			return bad("ctx %d is too small: the %s method needs at least 2", o.Ctx, Sliding)
		}
		if o.Stride < 1 || o.Stride > o.Ctx {
			return bad("stride %d must be between 1 and ctx %d", o.Stride, o.Ctx)
		}
	default:
		return bad("unknown method %q (want %q or %q)", string(m), LlamaCpp, Sliding)
	}
	return m, nil
}

// llamaCpp implements the LlamaCpp rule.
func llamaCpp(s Session, tokens []int, opts Options) (Result, error) {
	ctx := opts.Ctx
	if len(tokens)/2 < ctx { // len < 2*ctx without overflowing
		need := math.MaxInt
		if ctx <= math.MaxInt/2 {
			need = 2 * ctx
		}
		return Result{}, &TooShortError{Tokens: len(tokens), Need: need, Ctx: ctx, Method: LlamaCpp}
	}
	n := len(tokens) / ctx
	if opts.MaxChunks > 0 {
		n = min(n, opts.MaxChunks)
	}
	first := ctx / 2
	var a accum
	for c := range n {
		start := c * ctx
		ids := append([]int(nil), tokens[start:start+ctx]...)
		if opts.BOS >= 0 {
			ids[0] = opts.BOS
		}
		rows, err := logits(s, ids)
		if err != nil {
			return Result{}, fmt.Errorf("eval: chunk %d: %w", c+1, err)
		}
		for i := first; i < ctx-1; i++ {
			if err := a.add(rows[i], tokens[start+i+1]); err != nil {
				return Result{}, fmt.Errorf("eval: chunk %d, position %d: %w", c+1, i, err)
			}
		}
		if opts.Progress != nil {
			opts.Progress(c+1, n, a.ppl())
		}
	}
	return a.result(n, ctx, LlamaCpp), nil
}

// slidingWindows is the number of windows Sliding evaluates over n tokens:
// starts 0, S, 2S, ... up to the first window that reaches the end.
func slidingWindows(n, ctx, stride int) int {
	if n <= ctx {
		return 1
	}
	return (n-ctx+stride-1)/stride + 1
}

// sliding implements the Sliding rule.
func sliding(s Session, tokens []int, opts Options) (Result, error) {
	ctx, n := opts.Ctx, len(tokens)
	if n < 2 {
		return Result{}, &TooShortError{Tokens: n, Need: 2, Ctx: ctx, Method: Sliding}
	}
	total := slidingWindows(n, ctx, opts.Stride)
	if opts.MaxChunks > 0 {
		total = min(total, opts.MaxChunks)
	}
	var a accum
	prevEnd := 0
	for w := range total {
		begin := w * opts.Stride
		end := begin + min(ctx, n-begin)
		rows, err := logits(s, append([]int(nil), tokens[begin:end]...))
		if err != nil {
			return Result{}, fmt.Errorf("eval: window %d: %w", w+1, err)
		}
		// Token t is predicted by row t-1-begin; the window's first token
		// has no row before it.
		for t := max(prevEnd, begin+1); t < end; t++ {
			if err := a.add(rows[t-1-begin], tokens[t]); err != nil {
				return Result{}, fmt.Errorf("eval: window %d, token %d: %w", w+1, t, err)
			}
		}
		prevEnd = end
		if opts.Progress != nil {
			opts.Progress(w+1, total, a.ppl())
		}
	}
	return a.result(total, ctx, Sliding), nil
}

// logits runs ids from an empty cache and checks the shape of the answer.
func logits(s Session, ids []int) ([][]float32, error) {
	s.Reset()
	rows, err := s.Logits(ids)
	if err != nil {
		return nil, err
	}
	if len(rows) != len(ids) {
		return nil, fmt.Errorf("the model returned %d rows of logits for %d tokens", len(rows), len(ids))
	}
	return rows, nil
}

// accum sums negative log-likelihoods; the variance uses Welford's update,
// which, unlike llama.cpp's mean(v^2)-mean(v)^2, does not cancel when the
// values are nearly equal.
type accum struct {
	sum      float64
	mean, m2 float64 // running mean and sum of squared deviations
	n        int
}

func (a *accum) add(row []float32, target int) error {
	v, err := NLL(row, target)
	if err != nil {
		return err
	}
	a.sum += v
	a.n++
	d := v - a.mean
	a.mean += d / float64(a.n)
	a.m2 += d * (v - a.mean)
	return nil
}

func (a *accum) ppl() float64 {
	if a.n == 0 {
		return math.NaN()
	}
	return math.Exp(a.sum / float64(a.n))
}

// result finishes the sums; StdErr follows llama.cpp: the standard error of
// the mean NLL, sqrt(var/(n-1)) with var the population variance, times PPL.
func (a *accum) result(chunks, ctx int, m Method) Result {
	r := Result{Tokens: a.n, Chunks: chunks, Ctx: ctx, Method: m}
	if a.n == 0 {
		r.PPL, r.NLL = math.NaN(), math.NaN()
		return r
	}
	r.NLL = a.sum / float64(a.n)
	r.PPL = math.Exp(r.NLL)
	if a.n > 1 {
		r.StdErr = math.Sqrt(a.m2/float64(a.n)/float64(a.n-1)) * r.PPL
	}
	return r
}
