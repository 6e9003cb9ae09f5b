package qmodel

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"unsafe"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/tensor"
)

// Options configures Quantize.
type Options struct {
	Recipe quant.Recipe
	// Tokenizer names the tokenizer to copy for checkpoints without one.
	Tokenizer string
	// FallbackW8 quantizes a tensor whose input width the recipe's block
	// size does not divide at W8 instead of padding its last block.
	FallbackW8 bool
	// Force replaces an existing output folder.
	Force bool
	// Progress, when set, is called after each tensor.
	Progress func(done, total int, name string)
	// Prepare, when set, runs on the loaded float model before anything is
	// quantized: it may rewrite weights into an equivalent model
	// (rotations, calibrated scales) and return what quantization needs.
	Prepare func(m *arch.Model) (*Prepared, error)
}

// Prepared is what Options.Prepare hands to quantization.
type Prepared struct {
	// Hessians holds, by weight name, the [cols, cols] second moment of the
	// weight's calibration inputs: those weights are quantized with GPTQ.
	Hessians map[string][]float64
	GPTQ     quant.GPTQOptions
	// Importance holds, by weight name, the mean square of each input
	// channel over calibration: with GridSearch, each block's scale is
	// chosen to minimize the error weighted by it (quant.SearchGrid).
	Importance map[string][]float64
	GridSearch bool
	// Record goes to the manifest's "calibration" entry as JSON.
	Record any
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
}

// Report summarizes a quantization.
type Report struct {
	Output     string         `json:"output"`
	Recipe     string         `json:"recipe"`
	Tensors    []TensorReport `json:"tensors"`
	Params     int64          `json:"params"`
	WeightBits float64        `json:"bits_per_weight"` // over all parameters
}

// Quantize reads the model at src, quantizes it with opts.Recipe, and
// writes a quantized folder at out.
func Quantize(src, out string, opts Options) (*Report, error) {
	if err := opts.Recipe.Validate(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(out); err == nil && !opts.Force {
		return nil, fmt.Errorf("output %s exists (use --force to replace it)", out)
	}
	ck, err := detect.Open(src)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	am, err := arch.Load(ck)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	prep := &Prepared{}
	if opts.Prepare != nil {
		if prep, err = opts.Prepare(am); err != nil {
			return nil, err
		}
	}
	g, err := arch.Build(&am.Config, arch.BuildOptions{})
	if err != nil {
		return nil, err
	}
	linear, embed := roles(g)

	tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(out)), "."+filepath.Base(out)+".tmp-")
	if err != nil {
		return nil, fmt.Errorf("output: %w", err)
	}
	defer os.RemoveAll(tmp) // after a successful rename there is nothing left here

	recipeJSON, err := json.Marshal(opts.Recipe)
	if err != nil {
		return nil, err
	}
	man := Manifest{FormatVersion: FormatVersion, Config: am.Config, Recipe: recipeJSON,
		Source: src, Tensors: map[string]TensorEntry{}}
	if prep.Record != nil {
		if man.Calibration, err = json.Marshal(prep.Record); err != nil {
			return nil, err
		}
	}
	rep := &Report{Output: out, Recipe: opts.Recipe.Name}
	names := make([]string, 0, len(am.Weights))
	for n := range am.Weights {
		names = append(names, n)
	}
	slices.Sort(names)
	var stored []safetensors.Tensor
	var bits float64
	for i, name := range names {
		w := am.Weights[name]
		shape := g.Weights[name]
		rep.Params += int64(len(w))
		entry, tr, parts, err := quantizeOne(name, w, shape, linear[name], embed == name, am.Config.Tied, opts, prep)
		if err != nil {
			return nil, fmt.Errorf("tensor %s: %w", name, err)
		}
		man.Tensors[name] = entry
		rep.Tensors = append(rep.Tensors, tr)
		stored = append(stored, parts...)
		bits += tr.Bits * float64(len(w))
		if opts.Progress != nil {
			opts.Progress(i+1, len(names), name)
		}
	}
	rep.WeightBits = bits / float64(rep.Params)
	if err := safetensors.Write(filepath.Join(tmp, WeightsName), stored, map[string]string{"format": "aotlm-quant"}); err != nil {
		return nil, err
	}
	if man.Tokenizer, err = copyTokenizer(ck, src, opts.Tokenizer, tmp); err != nil {
		return nil, err
	}
	mb, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, ManifestName), mb, 0o644); err != nil {
		return nil, err
	}
	if opts.Force {
		if err := os.RemoveAll(out); err != nil {
			return nil, err
		}
	}
	if err := os.Rename(tmp, out); err != nil {
		return nil, fmt.Errorf("output: %w", err)
	}
	return rep, nil
}

// roles finds the weights the graph multiplies by (linear layers, the
// classifier) and the embedding table.
func roles(g *graph.Graph) (linear map[string]bool, embed string) {
	linear = map[string]bool{}
	for _, n := range g.Nodes {
		switch n.Op {
		case graph.OpLinear:
			linear[n.Weight] = true
		case graph.OpEmbed:
			embed = n.Weight
		}
	}
	return linear, embed
}

// quantizeOne picks the scheme of one tensor and quantizes it. Vectors
// (norm gains, biases) stay float32. A tied embedding/classifier table takes
// the classifier's scheme; an embedding used only for lookup takes W8 (one
// scale per row, which a lookup dequantizes cheaply).
func quantizeOne(name string, w []float32, shape []int, isLinear, isEmbed, tied bool, opts Options, prep *Prepared) (TensorEntry, TensorReport, []safetensors.Tensor, error) {
	tr := TensorReport{Name: name, Shape: shape}
	if len(shape) != 2 || (!isLinear && !isEmbed) {
		tr.Scheme, tr.Bits = "f32", 32
		return TensorEntry{Float: true, Shape: shape}, tr,
			[]safetensors.Tensor{{Name: name, DType: tensor.F32, Shape: int64s(shape), Data: w}}, nil
	}
	rows, cols := shape[0], shape[1]
	var s quant.Scheme
	switch {
	case isEmbed && tied:
		s = opts.Recipe.SchemeFor("lm_head.weight")
	case isEmbed && !isLinear:
		s = quant.Scheme{Kind: quant.KindW8}
	default:
		s = opts.Recipe.SchemeFor(name)
	}
	entry := TensorEntry{Shape: shape}
	if (s.Kind == quant.KindLPBQ || s.Kind == quant.KindQ4) && !quant.BlockDivides(cols, s.Block) && opts.FallbackW8 {
		entry.Fallback = fmt.Sprintf("width %d is not a multiple of block %d: w8", cols, s.Block)
		s = quant.Scheme{Kind: quant.KindW8}
	}
	q, err := quant.Quantize(w, rows, cols, s)
	if err != nil {
		return entry, tr, nil, err
	}
	if isLinear && prep.GridSearch {
		if err := quant.SearchGrid(q, w, prep.Importance[name]); err != nil {
			return entry, tr, nil, err
		}
	}
	if h := prep.Hessians[name]; h != nil && isLinear {
		if err := quant.GPTQOnGrid(q, w, h, prep.GPTQ); err != nil {
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
