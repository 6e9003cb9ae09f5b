package calib

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/op"
)

// Input is the statistics of one value that linears read (one graph node),
// shared by every linear that reads it.
type Input struct {
	Node    int      // graph node of the value
	Cols    int      // K, its channels
	Weights []string // the linear weights reading it, in graph order
	Rows    int      // rows observed
	SumAbs  []float64
	SumSq   []float64
	MaxAbs  []float64
	Min     float32
	Max     float32
	// H is sum x^T x over the rows [K*K] (Options.Hessian only).
	H []float64
	// Sample holds up to Options.SampleRows rows [*, K], taken evenly.
	Sample []float32

	threads int // workers of the Hessian products (0: GOMAXPROCS)
}

// MeanAbs returns the mean |x| per channel.
func (in *Input) MeanAbs() []float64 {
	out := make([]float64, in.Cols)
	for i, s := range in.SumAbs {
		out[i] = s / float64(max(in.Rows, 1))
	}
	return out
}

// MeanSq returns the mean x^2 per channel.
func (in *Input) MeanSq() []float64 {
	out := make([]float64, in.Cols)
	for i, s := range in.SumSq {
		out[i] = s / float64(max(in.Rows, 1))
	}
	return out
}

// Scale records that the value is now x/s (per channel), keeping the
// statistics those of the new value.
func (in *Input) Scale(s []float32) {
	k := in.Cols
	for j, v := range s {
		in.SumAbs[j] /= float64(v)
		in.SumSq[j] /= float64(v) * float64(v)
		in.MaxAbs[j] /= float64(v)
	}
	for i := range in.Sample {
		in.Sample[i] /= s[i%k]
	}
	if in.H != nil {
		for a := range k {
			for b := range k {
				in.H[a*k+b] /= float64(s[a]) * float64(s[b])
			}
		}
	}
	in.Min, in.Max = float32(math.Inf(1)), float32(math.Inf(-1))
	for j := range k {
		in.Min, in.Max = min(in.Min, -float32(in.MaxAbs[j])), max(in.Max, float32(in.MaxAbs[j]))
	}
}

// Stats is what Collect gathered.
type Stats struct {
	Graph    *graph.Graph
	Inputs   []*Input          // in graph order
	ByWeight map[string]*Input // input of each linear weight
	Samples  int
	Tokens   int
}

// Options configures Collect.
type Options struct {
	// Hessian accumulates X^T X per input (K*K float64 each), for GPTQ.
	Hessian bool
	// SampleRows bounds the rows kept per input (0: 256).
	SampleRows int
	// Threads for the interpreter.
	Threads int
}

// Collect runs m over each sample (from an empty cache) and gathers the
// statistics of every linear's input.
func Collect(m *arch.Model, samples [][]int, opts Options) (*Stats, error) {
	if len(samples) == 0 {
		return nil, fmt.Errorf("calib: no calibration samples")
	}
	g, err := arch.Build(&m.Config, arch.BuildOptions{AllLogits: true})
	if err != nil {
		return nil, err
	}
	in, err := graph.NewInterpreter(g, m.Weights, opts.Threads)
	if err != nil {
		return nil, err
	}
	st := &Stats{Graph: g, ByWeight: map[string]*Input{}, Samples: len(samples)}
	byNode := map[int]*Input{}
	for _, n := range g.Nodes {
		if n.Op != op.Linear {
			continue
		}
		id := n.In[0]
		x := byNode[id]
		if x == nil {
			k := g.Nodes[id].Cols
			x = &Input{Node: id, Cols: k, SumAbs: make([]float64, k), SumSq: make([]float64, k), MaxAbs: make([]float64, k),
				Min: float32(math.Inf(1)), Max: float32(math.Inf(-1))}
			if opts.Hessian {
				x.H = make([]float64, k*k)
				x.threads = opts.Threads
			}
			byNode[id] = x
			st.Inputs = append(st.Inputs, x)
		}
		x.Weights = append(x.Weights, n.Weight)
		st.ByWeight[n.Weight] = x
	}
	total, ctx := 0, 0
	for i, s := range samples {
		if len(s) == 0 {
			return nil, fmt.Errorf("calib: sample %d is empty", i+1)
		}
		total += len(s)
		ctx = max(ctx, len(s))
	}
	if ctx > m.Config.Context {
		return nil, fmt.Errorf("calib: samples of %d tokens exceed the model's context %d", ctx, m.Config.Context)
	}
	keep := opts.SampleRows
	if keep <= 0 {
		keep = 256
	}
	stride := max(1, (total+keep-1)/keep)
	row0 := 0 // global index of the current pass's first row
	seen := map[int]bool{}
	in.SetInputHook(func(n *graph.Node, slot int, x []float32, rows, cols int) []float32 {
		if n.Op != op.Linear || slot != 0 {
			return nil
		}
		id := n.In[0]
		if seen[id] {
			return nil // another linear of the same input
		}
		seen[id] = true
		byNode[id].observe(x, rows, row0, stride, keep)
		return nil
	})
	state := in.NewState(ctx)
	for _, s := range samples {
		state.Reset()
		clear(seen)
		if _, _, err := in.Run(state, s); err != nil {
			return nil, fmt.Errorf("calib: %w", err)
		}
		row0 += len(s)
	}
	st.Tokens = total
	return st, nil
}

func (in *Input) observe(x []float32, rows, row0, stride, keep int) {
	k := in.Cols
	for r := range rows {
		row := x[r*k : (r+1)*k]
		for j, v := range row {
			a := math.Abs(float64(v))
			in.SumAbs[j] += a
			in.SumSq[j] += a * a
			in.MaxAbs[j] = max(in.MaxAbs[j], a)
			in.Min, in.Max = min(in.Min, v), max(in.Max, v)
		}
		if (row0+r)%stride == 0 && len(in.Sample) < keep*k {
			in.Sample = append(in.Sample, row...)
		}
	}
	if in.H != nil {
		addGram(in.H, x[:rows*k], rows, k, in.threads)
	}
	in.Rows += rows
}

// addGram adds x^T x of x [rows, k] to h [k, k]. The products run on the
// SIMD row kernel in float32 within one call (sums of at most rows terms)
// and accumulate across calls in float64; the lower triangle is computed
// and mirrored.
func addGram(h []float64, x []float32, rows, k, threads int) {
	xt := make([]float32, k*rows) // [k, rows]: channel a's values over the rows
	for r := range rows {
		for a, v := range x[r*k : (r+1)*k] {
			xt[a*rows+r] = v
		}
	}
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	threads = max(1, min(threads, k/64))
	var wg sync.WaitGroup
	for w := range threads {
		// rows a of the triangle are split so that each worker gets about
		// the same number of products (a+1 each)
		lo := int(float64(k) * math.Sqrt(float64(w)/float64(threads)))
		hi := int(float64(k) * math.Sqrt(float64(w+1)/float64(threads)))
		if w == threads-1 {
			hi = k
		}
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			dst := make([]float32, k)
			for a := lo; a < hi; a++ {
				kernel.DotRows(dst[:a+1], xt[a*rows:(a+1)*rows], xt[:(a+1)*rows], rows)
				ha := h[a*k : a*k+a+1]
				for b, v := range dst[:a+1] {
					ha[b] += float64(v)
				}
			}
		}(lo, hi)
	}
	wg.Wait()
	const blk = 64 // mirror the lower triangle in cache-sized blocks
	for a0 := 0; a0 < k; a0 += blk {
		for b0 := 0; b0 <= a0; b0 += blk {
			for a := a0; a < min(a0+blk, k); a++ {
				for b := b0; b < min(b0+blk, a); b++ {
					h[b*k+a] = h[a*k+b]
				}
			}
		}
	}
}
