package qmodel

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/lora"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/output"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/tensor"
)

// Options configures Quantize.
type Options struct {
	Recipe quant.Recipe
	// Tokenizer names the tokenizer to copy for checkpoints without one.
	Tokenizer string
	// FallbackW8 quantizes a tensor whose input width the recipe's block
	// size does not divide at W8 instead of padding its last block. (A
	// q6k tensor whose width is not a multiple of 256 always becomes W8:
	// q6k has no padded form.)
	FallbackW8 bool
	// Force replaces an existing output folder.
	Force bool
	// Jobs is the number of tensors quantized at once (0: one per CPU).
	// Each holds its tensor in float32, so memory grows with Jobs; the
	// output is the same for every value.
	Jobs int
	// Progress, when set, is called after each tensor (from one goroutine
	// at a time).
	Progress func(Progress)
	// Prepare, when set, runs on the loaded float model before anything is
	// quantized: it may rewrite weights into an equivalent model
	// (rotations, calibrated scales) and return what quantization needs.
	// The model is then held whole in float32 (calibration needs it), so
	// memory is no longer bounded by the largest tensor.
	Prepare func(m *arch.Model) (*Prepared, error)
	// LoRA lists low-rank adapters merged into the float weights as they
	// are read (lora.Attach), before anything is calibrated or quantized.
	LoRA []lora.Spec
}

// Prepared is what Options.Prepare hands to quantization.
type Prepared struct {
	// Hessians holds, by weight name, the [cols, cols] second moment of the
	// weight's calibration inputs: those weights are quantized with GPTQ.
	Hessians    map[string][]float64
	GPTQ        quant.GPTQOptions
	factors     *factorCache // GPTQ factors shared by the weights of one input
	factorsOnce sync.Once
	// Importance holds, by weight name, the mean square of each input
	// channel over calibration: with GridSearch, each block's scale is
	// chosen to minimize the error weighted by it (quant.SearchGrid).
	Importance map[string][]float64
	GridSearch bool
	// Outliers gives, by linear weight name, the input channels kept in
	// float (graph.SplitOutliers); the weight is quantized without them.
	Outliers map[string][]int
	// Record goes to the manifest's "calibration" entry as JSON.
	Record any
}

// Progress is how far a Quantize call is.
type Progress struct {
	Done, Total int    // tensors
	Name        string // the tensor just finished
	// Bytes is how many bytes of tensor data have been written, of
	// TotalBytes.
	Bytes, TotalBytes int64
}

// TensorReport is what happened to one tensor.
type TensorReport struct {
	Name     string  `json:"name"`
	Scheme   string  `json:"scheme"`
	Shape    []int   `json:"shape"`
	Padded   bool    `json:"padded,omitempty"`
	Fallback string  `json:"fallback,omitempty"`
	RelErr   float64 `json:"rel_rmse"` // RMSE / RMS of the original
	Bits     float64 `json:"bits_per_weight"`
	GPTQ     bool    `json:"gptq,omitempty"` // integers chosen by GPTQ
	// Outliers is how many input channels stay in float (their columns
	// count in Bits at 32 bits each).
	Outliers int `json:"outlier_channels,omitempty"`
}

// Report summarizes a quantization.
type Report struct {
	Output     string         `json:"output"`
	Recipe     string         `json:"recipe"`
	Tensors    []TensorReport `json:"tensors"`
	Params     int64          `json:"params"`
	WeightBits float64        `json:"bits_per_weight"` // over all parameters
}

// afterTensor, when set (by tests), is called after each tensor is written
// and its buffers are dropped.
var afterTensor func(name string)

// Quantize reads the model at src, quantizes it with opts.Recipe, and
// writes a quantized folder at out. It streams: the tensors are read from
// the (memory-mapped) checkpoint, quantized and written to the output one
// at a time, opts.Jobs of them at once, so memory holds Jobs tensors in
// float32 rather than the model.
func Quantize(src, out string, opts Options) (*Report, error) {
	if err := opts.Recipe.Validate(); err != nil {
		return nil, err
	}
	inputs := []string{src, opts.Tokenizer}
	if err := output.CheckPlace(out, inputs); err != nil {
		return nil, err
	}
	if err := output.Check(out, inputs, opts.Force, true); err != nil {
		return nil, err
	}
	var owned []string
	if _, err := os.Stat(out); err == nil {
		if owned, err = OwnedFiles(out); err != nil {
			return nil, err
		}
		if err := output.CheckOwned(out, owned); err != nil {
			return nil, err
		}
	}
	release, err := output.Lock(out)
	if err != nil {
		return nil, err
	}
	defer release()
	if _, err := output.RemoveStale(out); err != nil {
		return nil, err
	}
	ck, err := detect.Open(src)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	var am weightReader
	var cfg arch.Config
	prep := &Prepared{}
	s, err := arch.Open(ck)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	if err := lora.Attach(s, opts.LoRA); err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	if opts.Prepare == nil {
		am, cfg = s, s.Config
	} else {
		m := &arch.Model{Config: s.Config, Weights: graph.Weights{}}
		for _, name := range s.Names() {
			if m.Weights[name], err = s.Read(name); err != nil {
				return nil, fmt.Errorf("%s: %w", src, err)
			}
		}
		if prep, err = opts.Prepare(m); err != nil {
			return nil, err
		}
		am, cfg = memWeights{m.Weights}, m.Config
	}
	g, err := arch.Build(&cfg, arch.BuildOptions{})
	if err != nil {
		return nil, err
	}
	linear, embeds := roles(g)

	tmp, err := output.MkdirTemp(out)
	if err != nil {
		return nil, fmt.Errorf("output: %w", err)
	}
	defer os.RemoveAll(tmp) // after a successful rename there is nothing left here
	defer output.Track(tmp)()

	recipeJSON, err := json.Marshal(opts.Recipe)
	if err != nil {
		return nil, err
	}
	var merged []MergedAdapter
	for _, sp := range opts.LoRA {
		merged = append(merged, MergedAdapter{Adapter: filepath.Base(filepath.Clean(sp.Path)), Scale: sp.Scale})
	}
	man := Manifest{FormatVersion: FormatVersion, Config: cfg, Recipe: recipeJSON, LoRA: merged,
		Source: src, Tensors: map[string]TensorEntry{}}
	if prep.Record != nil {
		if man.Calibration, err = json.Marshal(prep.Record); err != nil {
			return nil, err
		}
	}
	rep := &Report{Output: out, Recipe: opts.Recipe.Name}
	// Every tensor's scheme, and so its stored parts, follows from its
	// name and shape: the file's header is written before any data.
	names := am.Names()
	plans := make([]tensorPlan, len(names))
	var specs []safetensors.Tensor
	var totalBytes int64
	for i, name := range names {
		shape, ok := g.Weights[name]
		if !ok {
			return nil, fmt.Errorf("tensor %s: not in the graph", name)
		}
		plans[i] = planTensor(name, shape, linear[name], embeds[name], cfg.Tied, opts)
		if idx := prep.Outliers[name]; idx != nil {
			if plans[i].float || !linear[name] || embeds[name] {
				return nil, fmt.Errorf("tensor %s: outlier channels for a tensor that is not a quantized linear", name)
			}
			if err := graph.CheckIndex(idx, plans[i].cols); err != nil {
				return nil, fmt.Errorf("tensor %s: %w", name, err)
			}
			plans[i].outliers = idx
			plans[i].parts = append(plans[i].parts, safetensors.Tensor{Name: name + graph.OutlierSuffix, DType: tensor.F32,
				Shape: []int64{int64(plans[i].rows), int64(len(idx))}})
		}
		specs = append(specs, plans[i].parts...)
		for _, p := range plans[i].parts {
			n, err := tensor.NumElements(p.Shape)
			if err != nil {
				return nil, fmt.Errorf("tensor %s: %w", name, err)
			}
			b, err := p.DType.ByteSize(n)
			if err != nil {
				return nil, fmt.Errorf("tensor %s: %w", name, err)
			}
			totalBytes += b
		}
	}
	fw, err := safetensors.Create(filepath.Join(tmp, WeightsName), specs, map[string]string{"format": "aotlm-quant"})
	if err != nil {
		return nil, err
	}
	defer fw.Abort()
	rep.Tensors = make([]TensorReport, len(names))
	var (
		mu      sync.Mutex
		done    int
		written int64
	)
	err = forEach(len(names), opts.Jobs, func(i int) error {
		name, plan := names[i], &plans[i]
		w, err := am.Read(name)
		if err != nil {
			return err
		}
		entry, tr, parts, err := quantizeOne(plan, w, prep)
		if err != nil {
			return fmt.Errorf("tensor %q: %w", name, err)
		}
		var size int64
		for _, p := range parts {
			if err := fw.WriteTensor(p); err != nil {
				return err
			}
			size += int64(len(p.Raw)) + 4*int64(len(p.Data))
		}
		if len(w) >= gcAfter {
			// While a large tensor is live the heap's goal is twice its
			// size, and the garbage of the tensors quantized meanwhile
			// would grow to fill it: collect now, so the peak is the
			// tensors in flight, not twice the largest.
			w, parts = nil, nil
			runtime.GC()
		}
		mu.Lock()
		defer mu.Unlock()
		man.Tensors[name] = entry
		if idx := plan.outliers; idx != nil {
			man.Tensors[name+graph.OutlierSuffix] = TensorEntry{Float: true, Shape: []int{plan.rows, len(idx)}}
			if man.Outliers == nil {
				man.Outliers = map[string][]int{}
			}
			man.Outliers[name] = idx
		}
		rep.Tensors[i] = tr
		done++
		written += size
		if afterTensor != nil {
			afterTensor(name)
		}
		if opts.Progress != nil {
			opts.Progress(Progress{Done: done, Total: len(names), Name: name, Bytes: written, TotalBytes: totalBytes})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// summed in name order, as the report lists them
	var bits float64
	for i, tr := range rep.Tensors {
		n := int64(plans[i].rows) * int64(plans[i].cols)
		rep.Params += n
		bits += tr.Bits * float64(n)
	}
	rep.WeightBits = bits / float64(rep.Params)
	if err := fw.Commit(); err != nil {
		return nil, err
	}
	if man.Tokenizer, err = copyTokenizer(ck, src, opts.Tokenizer, tmp); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return nil, fmt.Errorf("output: %w", err)
	}
	man.Files = []string{ManifestName}
	for _, e := range ents {
		man.Files = append(man.Files, e.Name())
	}
	mb, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, ManifestName), mb, 0o644); err != nil {
		return nil, err
	}
	if err := output.ReplaceDir(tmp, out, owned); err != nil {
		return nil, err
	}
	return rep, nil
}

// gcAfter is the size (values) from which a tensor's quantization ends
// with a garbage collection.
const gcAfter = 1 << 22

// forEach calls fn(i) for i in [0, n), jobs calls at a time (0: one per
// CPU), taking the indexes in order. It returns the first error, after
// every call started has returned.
func forEach(n, jobs int, fn func(i int) error) error {
	if jobs <= 0 {
		jobs = runtime.GOMAXPROCS(0)
	}
	var (
		next     atomic.Int64
		failed   atomic.Bool
		firstErr error
		once     sync.Once
		wg       sync.WaitGroup
	)
	for range min(jobs, n) {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { firstErr = err })
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// roles finds the weights the graph multiplies by (linear layers, the
// classifier) and the tables it looks rows up in: the token embedding, and
// per-layer embedding tables where a family has them (Gemma 4).
func roles(g *graph.Graph) (linear, embeds map[string]bool) {
	linear, embeds = map[string]bool{}, map[string]bool{}
	for _, n := range g.Nodes {
		switch n.Op {
		case op.Linear:
			linear[n.Weight] = true
		case op.Embed:
			embeds[n.Weight] = true
		}
	}
	return linear, embeds
}

// tensorPlan is how one tensor is stored: its scheme (or float32) and
// the safetensors parts that hold it.
type tensorPlan struct {
	name       string
	shape      []int
	rows, cols int
	float      bool // kept as float32
	linear     bool // the weight of a linear
	scheme     quant.Scheme
	fallback   string
	parts      []safetensors.Tensor // names, dtypes and shapes
	outliers   []int                // input channels kept in float (Prepared.Outliers)
}

// planTensor picks the scheme of one tensor. Vectors (norm gains, biases)
// stay float32. A tied embedding/classifier table (looked up and
// multiplied by) takes the classifier's scheme; a table used only for
// lookup (an untied embedding, a per-layer embedding) takes W8 (one scale
// per row, which a lookup dequantizes cheaply) unless an override names it.
func planTensor(name string, shape []int, isLinear, isEmbed, tied bool, opts Options) tensorPlan {
	p := tensorPlan{name: name, shape: shape, rows: 1, cols: 1, linear: isLinear}
	for _, d := range shape {
		p.rows *= d
	}
	if len(shape) != 2 || (!isLinear && !isEmbed) {
		p.float = true
		p.parts = []safetensors.Tensor{{Name: name, DType: tensor.F32, Shape: int64s(shape)}}
		return p
	}
	p.rows, p.cols = shape[0], shape[1]
	var s quant.Scheme
	switch {
	case isEmbed && tied && isLinear:
		s = opts.Recipe.SchemeFor("lm_head.weight")
	case isEmbed && !isLinear:
		s = quant.Scheme{Kind: quant.KindW8}
		if o, ok := opts.Recipe.OverrideFor(name); ok {
			s = o
		}
	default:
		s = opts.Recipe.SchemeFor(name)
	}
	if info, ok := quant.Lookup(s.Kind); ok {
		switch {
		case info.Blocks != nil && !quant.BlockDivides(p.cols, s.Block) && opts.FallbackW8:
			p.fallback = fmt.Sprintf("width %d is not a multiple of block %d: w8", p.cols, s.Block)
			s = quant.Scheme{Kind: quant.KindW8}
		case info.Super > 0 && p.cols%info.Super != 0:
			p.fallback = fmt.Sprintf("width %d is not a multiple of %d (%s super-blocks): w8", p.cols, info.Super, s.Kind)
			s = quant.Scheme{Kind: quant.KindW8}
		}
	}
	p.scheme = s
	if s.Kind == quant.KindF16 {
		p.parts = []safetensors.Tensor{{Name: name, DType: tensor.F16, Shape: int64s(shape)}}
		return p
	}
	fs := folderSchemes[s.Kind]
	if fs == nil { // Validate lets no such recipe through
		fs = folderSchemes[quant.KindW8]
	}
	scales, extra := fs.parts(name, p.rows, p.cols, s)
	p.parts = append([]safetensors.Tensor{{Name: name + ".q", DType: tensor.I8, Shape: int64s(shape)},
		{Name: name + ".scales", DType: tensor.F32, Shape: []int64{int64(scales)}}}, extra...)
	return p
}

// quantizeOne quantizes one tensor w as p says and returns its manifest
// entry, its report and its stored parts (with data).
func quantizeOne(p *tensorPlan, w []float32, prep *Prepared) (TensorEntry, TensorReport, []safetensors.Tensor, error) {
	name, shape := p.name, p.shape
	tr := TensorReport{Name: name, Shape: shape}
	if p.float {
		tr.Scheme, tr.Bits = "f32", 32
		return TensorEntry{Float: true, Shape: shape}, tr,
			[]safetensors.Tensor{{Name: name, DType: tensor.F32, Shape: int64s(shape), Data: w}}, nil
	}
	var outl []float32
	if p.outliers != nil {
		w, outl = graph.TakeOutliers(w, p.rows, p.cols, p.outliers)
	}
	s := p.scheme
	entry := TensorEntry{Shape: shape, Fallback: p.fallback}
	q, err := quant.Quantize(w, p.rows, p.cols, s)
	if err != nil {
		return entry, tr, nil, err
	}
	if p.linear && prep.GridSearch {
		if err := quant.SearchGrid(q, w, prep.Importance[name]); err != nil {
			return entry, tr, nil, err
		}
	}
	if h := prep.Hessians[name]; h != nil && p.linear {
		if err := gptq(q, w, h, prep); err != nil {
			return entry, tr, nil, err
		}
		entry.GPTQ, tr.GPTQ = true, true
	}
	stats, err := q.Error(w)
	if err != nil {
		return entry, tr, nil, err
	}
	entry.Scheme, entry.Padded = SchemeOf(s), q.Padded
	tr.Scheme, tr.Padded, tr.Fallback = s.String(), q.Padded, entry.Fallback
	tr.RelErr, tr.Bits = stats.Relative, q.BitsPerWeight()
	var parts []safetensors.Tensor
	if outl != nil {
		// RelErr is the quantized part's: the float columns are exact
		tr.Outliers = len(p.outliers)
		tr.Bits += 32 * float64(len(p.outliers)) / float64(p.cols)
		parts = append(parts, safetensors.Tensor{Name: name + graph.OutlierSuffix, DType: tensor.F32,
			Shape: []int64{int64(p.rows), int64(len(p.outliers))}, Data: outl})
	}
	if s.Kind == quant.KindF16 {
		parts = append(parts, safetensors.Tensor{Name: name, DType: tensor.F16, Shape: int64s(shape), Raw: u16Bytes(q.Half)})
		return entry, tr, parts, nil
	}
	parts = append(parts, safetensors.Tensor{Name: name + ".q", DType: tensor.I8, Shape: int64s(shape), Raw: i8Bytes(q.Q)},
		safetensors.Tensor{Name: name + ".scales", DType: tensor.F32, Shape: []int64{int64(len(q.Scales))}, Data: q.Scales})
	if len(q.Codes) > 0 {
		parts = append(parts, safetensors.Tensor{Name: name + ".codes", DType: tensor.U8, Shape: []int64{int64(len(q.Codes))}, Raw: q.Codes})
	}
	if len(q.Zeros) > 0 {
		parts = append(parts, safetensors.Tensor{Name: name + ".zeros", DType: tensor.F32, Shape: []int64{int64(len(q.Zeros))}, Data: q.Zeros})
	}
	if len(q.Sub) > 0 {
		parts = append(parts, safetensors.Tensor{Name: name + ".sub", DType: tensor.I8, Shape: []int64{int64(len(q.Sub))}, Raw: i8Bytes(q.Sub)})
	}
	return entry, tr, parts, nil
}

func int64s(s []int) []int64 {
	out := make([]int64, len(s))
	for i, v := range s {
		out[i] = int64(v)
	}
	return out
}

func i8Bytes(v []int8) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v))
}

func u16Bytes(v []uint16) []byte {
	out := make([]byte, 2*len(v))
	for i, x := range v {
		out[2*i], out[2*i+1] = byte(x), byte(x>>8)
	}
	return out
}

var errNoTokenizer = errors.New("no tokenizer")

// weightReader serves a model's weights by canonical name.
type weightReader interface {
	Names() []string
	Read(name string) ([]float32, error)
}

// memWeights serves weights held in memory (a prepared model).
type memWeights struct{ w graph.Weights }

func (m memWeights) Names() []string {
	names := make([]string, 0, len(m.w))
	for n := range m.w {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (m memWeights) Read(name string) ([]float32, error) {
	v, ok := m.w[name]
	if !ok {
		return nil, fmt.Errorf("no tensor %s", name)
	}
	return v, nil
}

// factorCache holds GPTQ's factor of each Hessian while some weight that
// reads that input is still to be quantized: q, k and v (gate and up)
// share one factorization.
type factorCache struct {
	mu      sync.Mutex
	entries map[*float64]*factorEntry
}

type factorEntry struct {
	once  sync.Once
	f     *quant.GPTQFactor
	err   error
	users int // weights still to use it
}

// gptq runs GPTQ on q with the Hessian h of its input, factoring h once
// for all the weights of prep.Hessians that share it.
func gptq(q *quant.Quantized, w []float32, h []float64, prep *Prepared) error {
	c := prep.factorCache()
	c.mu.Lock()
	e := c.entries[&h[0]]
	if e == nil {
		e = &factorEntry{}
		for _, o := range prep.Hessians {
			if len(o) > 0 && &o[0] == &h[0] {
				e.users++
			}
		}
		c.entries[&h[0]] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.f, e.err = quant.FactorGPTQ(h, q.Cols, prep.GPTQ) })
	defer func() {
		c.mu.Lock()
		if e.users--; e.users <= 0 {
			delete(c.entries, &h[0])
		}
		c.mu.Unlock()
	}()
	if e.err != nil {
		return e.err
	}
	return e.f.Apply(q, w)
}

// factorCache returns p's cache of GPTQ factors, made on first use.
func (p *Prepared) factorCache() *factorCache {
	p.factorsOnce.Do(func() { p.factors = &factorCache{entries: map[*float64]*factorEntry{}} })
	return p.factors
}
