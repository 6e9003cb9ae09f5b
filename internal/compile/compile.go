package compile

import (
	"fmt"
	"maps"
	"slices"

	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/quant"
)

// LayoutF32 is the manifest's weights tag for plain row-major float32
// tensors (stored with an empty layout in the tensor index).
const LayoutF32 = "f32"

// Input is what Compile needs: the graph (built for generation, i.e. the
// logits of the last row only), its weights, the descriptive manifest
// fields, the AR lengths to plan for and the context.
type Input struct {
	Graph   *graph.Graph
	Weights graph.Weights
	// Adapters are low-rank adapters the artifact carries (as blobs the
	// engine loads at open; Manifest.Adapters), each Ref with its
	// linears.
	Adapters []CarriedAdapter
	// Manifest carries architecture, hyper-parameters, provenance, chat
	// template, BOS/EOS and vocabulary; Compile fills Format, Ctx, Plans,
	// Weights and Tokenizer.
	Manifest plan.Manifest
	// Tokenizer holds the bytes that rebuild the tokenizer, of kind
	// TokenizerKind ("tokenizer.json", "sentencepiece", "llama2c",
	// "gguf-metadata", "gpt2-files"); nil stores none.
	Tokenizer     []byte
	TokenizerKind string
	ARLens        []int // e.g. 1 and 32; 1 is always added
	Ctx           int   // KV cache positions
	// Quantized holds the weights to store in a quantized layout (Weights
	// then holds their dequantized values, which the interpreter checks
	// and calibration use). Others are stored as float32.
	Quantized map[string]*quant.Quantized
	// KVCache, when set, stores the cache quantized (see plan.KVCache).
	KVCache *plan.KVCache
	// FloatActivations keeps quantized weights in their unpacked layouts,
	// which the engine multiplies with float32 activations (exactly the
	// quantized model's arithmetic, and slow). By default every weight
	// whose shape allows it is packed for the int8-activation kernels.
	FloatActivations bool
	// Source, when set, replaces Weights and Quantized: each weight is read
	// from it when it is written, and dropped after, so the model is never
	// in memory whole. Its shapes are checked as the weights are read.
	Source WeightSource
	// Jobs is the number of weights read and encoded at once (0: one per
	// CPU); memory grows with it, the artifact does not change.
	Jobs int
	// Progress, when set, is called after each weight is written.
	Progress func(Progress)
	// Vision, when set, is an image encoder compiled into the same file
	// (plans named by plan.VisionPlanName, weights beside the text's).
	Vision *VisionInput
	// MTP, when set, is a multi-token-prediction draft head compiled into
	// the same file, with plans of the same AR lengths (plan.MTP); the
	// model's plans then keep their hidden rows (plan.Plan.Hidden).
	MTP *MTPInput
	// AllowNonFinite keeps an artifact whose weights or probe logits hold
	// a NaN or an infinity, which Compile refuses by default.
	AllowNonFinite bool
}

// Progress is how far the writing of an artifact's weights is.
type Progress struct {
	Done, Total int    // weights
	Name        string // the weight just written
	Bytes       int64  // bytes of weights written so far
}

// WeightSource reads the weights Compile stores, one at a time. Weight may
// be called from several goroutines at once.
type WeightSource interface {
	// Weight returns the named weight.
	Weight(name string) (Weight, error)
}

// Weight is one weight to store: its quantized form, stored in its
// layout when it has one, else its float32 values.
type Weight struct {
	Values    []float32
	Quantized *quant.Quantized
	// F16Rows stores a binary16 Quantized (scheme f16) of a linear's
	// matrix as binary16 rows (plan layout f16-rows), which the engine
	// multiplies as such; without it f16 weights are widened to float32.
	F16Rows bool
	// Release, when set, is called once the weight is encoded (it may drop
	// memory the weight aliases, such as the pages of a mapped file).
	Release func()
}

// mapSource serves the weights of Input.Weights and Input.Quantized.
type mapSource struct {
	vals graph.Weights
	qs   map[string]*quant.Quantized
}

func (m mapSource) Weight(name string) (Weight, error) {
	w := Weight{Values: m.vals[name], Quantized: m.qs[name]}
	if w.Values == nil && w.Quantized == nil {
		return w, fmt.Errorf("no weight %q", name)
	}
	return w, nil
}

// Compile writes the artifact for in at outPath: one plan per AR length,
// the weights once, the tokenizer blob and the manifest. The complete file
// is proven runnable (see probeArtifact) before it is renamed into place.
func Compile(in Input, outPath string) error {
	if in.Graph == nil {
		return fmt.Errorf("compile: no graph")
	}
	if in.Ctx < 1 || in.Ctx > plan.MaxCtx {
		return fmt.Errorf("compile: context %d is outside [1, %d]", in.Ctx, plan.MaxCtx)
	}
	src := in.Source
	if src == nil {
		// NewInterpreter checks that every weight is present with its size.
		if _, err := graph.NewInterpreter(in.Graph, in.Weights, 1); err != nil {
			return fmt.Errorf("compile: %w", err)
		}
		src = mapSource{in.Weights, in.Quantized}
	}
	lens := append([]int{1}, in.ARLens...)
	if encoderGraph(in.Graph) {
		// an encoder's pass holds a whole sequence
		lens = append(lens, in.Ctx)
	}
	slices.Sort(lens)
	lens = slices.Compact(lens)

	m := in.Manifest
	m.Format, m.Ctx, m.Weights, m.Plans, m.KVCache = plan.ManifestFormat, in.Ctx, LayoutF32, nil, in.KVCache
	var plans []*plan.Plan
	for _, n := range lens {
		if n > in.Ctx {
			return fmt.Errorf("compile: AR length %d exceeds the context %d", n, in.Ctx)
		}
		p, err := Lower(in.Graph, n, in.Ctx)
		if err != nil {
			return err
		}
		plans = append(plans, p)
		m.Plans = append(m.Plans, plan.PlanRef{ARLen: n, Blob: plan.BlobName(n)})
	}
	if m.Embedding != nil && m.Embedding.Pooling != plan.PoolRank {
		for _, p := range plans {
			if err := keepHidden(p); err != nil {
				return fmt.Errorf("compile: an embedding model's plan for AR length %d: %w", p.Rows, err)
			}
		}
	}
	var vplans, mplans []*plan.Plan
	shapes := in.Graph.Weights
	if t := in.MTP; t != nil {
		text := shapes
		var err error
		if mplans, m.MTP, shapes, err = lowerMTP(t, plans, lens, in.Ctx, shapes); err != nil {
			return err
		}
		own := graph.Weights{}
		for n := range t.Graph.Weights {
			if _, ok := text[n]; !ok {
				own[n] = t.Weights[n]
			}
		}
		src = mtpSource{text: src, own: own}
	}
	if v := in.Vision; v != nil {
		var err error
		if vplans, m.Vision, err = lowerVision(v); err != nil {
			return err
		}
		if _, err := graph.NewInterpreter(v.Graph, v.Weights, 1); err != nil {
			return fmt.Errorf("compile: vision encoder: %w", err)
		}
		shapes = maps.Clone(shapes)
		for n, s := range v.Graph.Weights {
			if _, ok := shapes[n]; ok {
				return fmt.Errorf("compile: the vision encoder's weight %q has the name of a text weight", n)
			}
			shapes[n] = s
		}
		src = bothSource{text: src, vision: newVisionSource(v)}
	}
	var adapterBlobs [][]byte
	for _, a := range in.Adapters {
		b, err := plan.EncodeAdapter(a.Linears)
		if err != nil {
			return fmt.Errorf("compile: adapter %s: %w", a.Ref.Name, err)
		}
		a.Ref.Blob = plan.AdapterBlobName(a.Ref.Name)
		m.Adapters = append(m.Adapters, a.Ref)
		adapterBlobs = append(adapterBlobs, b)
	}
	if in.Tokenizer != nil {
		m.Tokenizer = &plan.TokenizerRef{Kind: in.TokenizerKind, Blob: "tokenizer/" + in.TokenizerKind}
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("compile: %w", err)
	}

	w, err := artifact.Create(outPath)
	if err != nil {
		return err
	}
	defer w.Abort()
	w.Check = func(tmp string) error { return probeArtifact(tmp, in.AllowNonFinite) }
	mixed, err := writeWeights(w, shapes, src, !in.FloatActivations, in.Jobs, in.Progress)
	if err != nil {
		return err
	}
	if mixed {
		m.Weights = plan.WeightsMixed
	}
	for i, p := range plans {
		b, err := p.Encode()
		if err != nil {
			return err
		}
		if err := w.AddBlob(artifact.KindPlan, m.Plans[i].Blob, b); err != nil {
			return err
		}
	}
	for i, p := range mplans {
		b, err := p.Encode()
		if err != nil {
			return err
		}
		if err := w.AddBlob(artifact.KindPlan, m.MTP.Plans[i].Blob, b); err != nil {
			return err
		}
	}
	for i, p := range vplans {
		b, err := p.Encode()
		if err != nil {
			return err
		}
		if err := w.AddBlob(artifact.KindPlan, m.Vision.Plans[i].Blob, b); err != nil {
			return err
		}
	}
	for i, b := range adapterBlobs {
		if err := w.AddBlob(artifact.KindBlob, m.Adapters[i].Blob, b); err != nil {
			return err
		}
	}
	if m.Tokenizer != nil {
		if err := w.AddBlob(artifact.KindTokenizer, m.Tokenizer.Blob, in.Tokenizer); err != nil {
			return err
		}
	}
	if err := w.SetManifest(&m); err != nil {
		return err
	}
	return w.Commit()
}

// CarriedAdapter is a low-rank adapter an artifact carries: its manifest
// entry (Compile sets the blob name) and its linears.
type CarriedAdapter struct {
	Ref     plan.AdapterRef
	Linears []plan.AdapterLinear
}

// encoderGraph reports whether g's attention is bidirectional (a text
// encoder's).
func encoderGraph(g *graph.Graph) bool {
	for _, n := range g.Nodes {
		if n.Op == op.Attention && n.Attn != nil && n.Attn.Bidirectional {
			return true
		}
	}
	return false
}
