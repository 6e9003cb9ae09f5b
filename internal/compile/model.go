package compile

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"strings"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/hf"
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/limits"
	"github.com/aotlm/aotlm/internal/lora"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/output"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/rotate"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/tokenizer"
	"github.com/aotlm/aotlm/internal/userfile"
)

// Options configures CompileModel and CompileFile.
type Options struct {
	// Pooling makes the artifact an embedding model pooling its hidden
	// rows this way ("mean", "cls" or "last"; plan.Embedding), or a
	// reranker ("rank"), whatever the checkpoint declares; "" keeps the
	// checkpoint's declaration (GGUF pooling_type), "none" makes a
	// generative model of it.
	Pooling string
	ARLens  []int // AR lengths besides 1 (e.g. 32)
	Ctx     int   // KV cache positions; 0 means the model's trained context
	// Tokenizer is a tokenizer file (tokenizer.json, .model, llama2.c
	// .bin, .gguf) or folder to store instead of the checkpoint's own.
	Tokenizer string
	// KV is the cache storage: "" or "f32" (float32), "f16", "q4" or "q4v"
	// (4-bit rows rotated per head, plan.KVCacheQ4 and plan.KVCacheQ4V;
	// the head dimension must be a power of two), or "u8" (see
	// plan.KVCache). A "u8" cache's scales and a 4-bit cache's centers
	// come from a calibration pass of the float32 graph over CalibIDs (or
	// a self-generated sequence when it is empty; see calibrateKV and
	// centerKV).
	// A model without attention (RWKV-7) has no KV cache; KV is then
	// ignored.
	KV       string
	CalibIDs []int
	// CalibText, when set, is a text file whose tokens (by the stored
	// tokenizer, at most MaxCalibTokens) replace CalibIDs.
	CalibText string
	// ClampCtx lowers Ctx to the model's trained context instead of
	// refusing a larger one (what `run` wants for its default).
	ClampCtx bool
	// FloatActivations keeps quantized weights unpacked, for float32
	// activations (see Input.FloatActivations).
	FloatActivations bool
	// GGUFWeights is how a GGUF file's block-quantized weights are
	// stored: GGUFNative ("" too) or GGUFFloat32 (see GGUFConversionOf).
	GGUFWeights string
	// AllowNonFinite keeps NaN and infinite weights (see
	// Input.AllowNonFinite), which are refused by default.
	AllowNonFinite bool
	// Jobs and Progress: see Input.
	Jobs     int
	Progress func(Progress)
	// MMProj is llama.cpp's vision GGUF (mmproj) for a text GGUF: its
	// encoder is compiled into the artifact too, as a SmolVLM folder's is.
	MMProj string
	// VisionWeights is how a vision encoder's matrices are stored:
	// VisionF32, VisionF16 or VisionW8; "" is the recipe's choice for a
	// quantized folder whose recipe has one, else DefaultVisionWeights.
	VisionWeights string
	// VisionBuckets lists the image sizes a Qwen2-VL encoder is compiled
	// for, "HxW" in pixels separated by commas, one vision plan each; ""
	// is vision.Qwen2VL.DefaultBuckets.
	VisionBuckets string
	// VisionLlamaCpp records in the artifact that its encoder follows
	// llama.cpp's mtmd where the family's Hugging Face processing differs
	// (vlm.Options.LlamaCpp; InternVL's class token position and tile
	// grid).
	VisionLlamaCpp bool
	// LoRA lists low-rank adapters merged into the weights as they are
	// read, in order, each at its scale (lora.Attach): the artifact is
	// the adapted model.
	LoRA []lora.Spec
	// Carry lists low-rank adapters the artifact carries beside the
	// weights, each under its name, its scale folded in: sessions choose
	// one at run time.
	Carry []lora.Named
}

// MaxCalibTokens bounds the calibration sequence read from CalibText.
const MaxCalibTokens = 512

// Source is what a checkpoint brings besides config and weights.
type Source struct {
	Tokenizer    *tokenizer.Stored // nil: none is stored
	ChatTemplate string            // Jinja source, or ""
	Provenance   map[string]any    // recorded in the manifest as given
	// Quantized holds the integers of the weights a quantized folder
	// stores quantized; the model's weights are their dequantized values.
	Quantized map[string]*quant.Quantized
	// Recipe and Generation go to the manifest as given.
	Recipe []byte
	// Rotation goes to the manifest as given: the rotations folded into
	// the weights (rotate.Report as JSON), or nil.
	Rotation []byte
	// Passport goes to the manifest as given (the quantized folder's).
	Passport   []byte
	Generation map[string]any
	// Outliers gives, by linear weight, the input channels computed in
	// float (graph.SplitOutliers); the weights include W+OutlierSuffix.
	Outliers map[string][]int
	// Vision, when set, is the image encoder compiled beside the model.
	Vision *VisionInput
	// MTP, when set, is the multi-token-prediction draft head compiled
	// beside the model.
	MTP *MTPInput
}

// CompileModel compiles a resolved model to outPath.
func CompileModel(m *arch.Model, src Source, opts Options, outPath string) error {
	floats := func() (graph.Weights, error) { return m.Weights, nil }
	return compileModel(m.Config, mapSource{m.Weights, src.Quantized}, floats, src, opts, outPath)
}

// compileModel compiles the model of config trained whose weights ws
// serves to outPath. floats returns every weight in float32, which only
// the u8 KV cache calibration needs (and then holds while it runs).
func compileModel(trained arch.Config, ws WeightSource, floats func() (graph.Weights, error), src Source, opts Options, outPath string) error {
	ctx, most := opts.Ctx, trained.MaxContext()
	if ctx <= 0 {
		ctx = trained.Context
	}
	if ctx > most && opts.ClampCtx {
		ctx = most
	}
	if ctx > most {
		return fmt.Errorf("compile: context %d exceeds the model's trained context %d", ctx, most)
	}
	if err := limits.CheckAlloc(fmt.Sprintf("a KV cache of %d positions", ctx), KVCacheBytes(&trained, ctx, opts.KV)); err != nil {
		return fmt.Errorf("compile: %w; compile for a smaller context", err)
	}
	// the graph is built for ctx positions, which picks longrope's factors
	// and dynamic scaling's base
	cfg := trained
	if cfg.RopeContext <= 0 && (cfg.RopeScaling.Type == "longrope" || cfg.RopeScaling.Type == "dynamic") {
		cfg.RopeContext = ctx
	}
	g, err := arch.Build(&cfg, arch.BuildOptions{AllLogits: false})
	if err != nil {
		return fmt.Errorf("compile: %w", err)
	}
	if len(src.Outliers) > 0 {
		if g, err = graph.SplitOutliers(g, src.Outliers); err != nil {
			return fmt.Errorf("compile: %w", err)
		}
	}
	if gs, ok := ws.(*ggufSource); ok {
		gs.useGraph(g)
	}
	if fs, ok := ws.(folderSource); ok {
		// a recipe's f16 matrices stay binary16 rows
		ws = halfSource{WeightSource: ws, shapes: g.Weights, matrices: matrixWeights(g), half: fs.half}
	}
	hp, err := hyperParams(&cfg)
	if err != nil {
		return err
	}
	extend, err := extendOf(&cfg, ctx)
	if err != nil {
		return fmt.Errorf("compile: %w", err)
	}
	var rot *rotate.AdapterMap
	if len(opts.Carry) > 0 {
		if rot, err = lora.RotationMap(src.Recipe, src.Rotation); err != nil {
			return fmt.Errorf("compile --adapter: %w", err)
		}
	}
	carried, err := carryAdapters(&cfg, opts.Carry, rot)
	if err != nil {
		return err
	}
	in := Input{Adapters: carried, Graph: g, ARLens: opts.ARLens, Ctx: ctx, Jobs: opts.Jobs, Progress: opts.Progress,
		Manifest: plan.Manifest{Architecture: trained.Family, HyperParams: hp, Extend: extend, Provenance: src.Provenance,
			ChatTemplate: src.ChatTemplate, BOS: trained.BOS, EOS: trained.EOS, Vocab: trained.Vocab,
			Recipe: src.Recipe, Rotation: src.Rotation, Generation: src.Generation, Passport: src.Passport}}
	switch pool := cmp.Or(opts.Pooling, trained.Pooling); {
	case cfg.Bidirectional && !plan.ValidPooling(pool):
		return fmt.Errorf("compile: %s is a text encoder (bidirectional attention): it needs a pooling (mean, cls or last), not %q", trained.Family, pool)
	case pool == "" || pool == "none":
	case plan.ValidPooling(pool), pool == plan.PoolRank:
		in.Manifest.Embedding = &plan.Embedding{Pooling: pool}
	default:
		return fmt.Errorf("compile: pooling %q: want mean, cls, last, rank or none", pool)
	}
	if err := specialIDsInVocab(&trained); err != nil {
		return fmt.Errorf("compile: %w", err)
	}
	if src.Tokenizer != nil {
		// the artifact must be able to rebuild its tokenizer, and the
		// tokenizer's ids must index the model's embeddings
		t, err := src.Tokenizer.Build(trained.Vocab)
		if err != nil {
			return fmt.Errorf("compile: tokenizer (%s): %w", src.Tokenizer.Kind, err)
		}
		if t.VocabSize() > trained.Vocab {
			return fmt.Errorf("compile: the tokenizer has %d tokens, more than the model's vocabulary of %d (is it this model's tokenizer?)", t.VocabSize(), trained.Vocab)
		}
		in.Tokenizer, in.TokenizerKind = src.Tokenizer.Data, src.Tokenizer.Kind
	}
	in.FloatActivations = opts.FloatActivations
	in.AllowNonFinite = opts.AllowNonFinite
	in.Vision = src.Vision
	if src.MTP == nil && arch.HasMTP(&cfg) && src.Provenance["mtp"] == nil {
		// say why the artifact has no head (the cache keeps it then)
		prov := maps.Clone(src.Provenance)
		if prov == nil {
			prov = map[string]any{}
		}
		prov["mtp"] = "not compiled: this source does not carry the multi-token-prediction head (compile the Hugging Face folder or the GGUF)"
		in.Manifest.Provenance = prov
	}
	if src.MTP != nil {
		mg, err := arch.MTPGenerationGraph(&cfg)
		if err != nil {
			return fmt.Errorf("compile: %w", err)
		}
		in.MTP = &MTPInput{Graph: mg, Weights: src.MTP.Weights}
	}
	if m, ok := ws.(mapSource); ok {
		in.Weights, in.Quantized = m.vals, m.qs // Compile checks them whole
	} else {
		in.Source = ws
	}
	kv := opts.KV
	if g.Layers == 0 && (kv == plan.KVCacheU8 || kv == plan.KVCacheF16 || plan.IsKVQ4(kv)) {
		// a recurrent model (RWKV-7) has no KV cache: its state stays
		// float32 and the cache dtype has nothing to apply to
		kv = ""
	}
	// calib runs the float32 graph interpreter over the calibration ids:
	// the model is read whole for it and dropped before the weights are
	// written
	calib := func(run func(g *graph.Graph, w graph.Weights, ids []int) (*plan.KVCache, error)) (*plan.KVCache, error) {
		ids := opts.CalibIDs
		if opts.CalibText != "" {
			if ids, err = calibTokens(opts.CalibText, src.Tokenizer, trained.Vocab); err != nil {
				return nil, err
			}
		}
		w, err := floats()
		if err != nil {
			return nil, err
		}
		if _, err := graph.NewInterpreter(g, w, 1); err != nil {
			return nil, fmt.Errorf("compile: %w", err)
		}
		return run(g, w, ids)
	}
	switch kv {
	case "", "f32":
	case plan.KVCacheU8:
		if in.KVCache, err = calib(func(g *graph.Graph, w graph.Weights, ids []int) (*plan.KVCache, error) {
			return calibrateKV(g, w, ids, trained.BOS, ctx)
		}); err != nil {
			return err
		}
	case plan.KVCacheF16:
		in.KVCache = &plan.KVCache{DType: plan.KVCacheF16}
	case plan.KVCacheQ4, plan.KVCacheQ4V:
		if err := checkQ4Heads(g, kv); err != nil {
			return err
		}
		if in.KVCache, err = calib(func(g *graph.Graph, w graph.Weights, ids []int) (*plan.KVCache, error) {
			return centerKV(g, w, kv, ids, trained.BOS, ctx)
		}); err != nil {
			return err
		}
	default:
		return fmt.Errorf("compile: kv cache dtype %q is not f32, f16, u8, q4 or q4v", opts.KV)
	}
	return Compile(in, outPath)
}

// KVCacheBytes is the size of the KV cache of one session of ctx positions
// stored as kv ("", "f32", "f16", "u8", "q4" or "q4v"), keys and values of every
// layer.
func KVCacheBytes(c *arch.Config, ctx int, kv string) int64 {
	elem := int64(4)
	switch kv {
	case plan.KVCacheF16:
		elem = 2
	case plan.KVCacheU8:
		elem = 1
	}
	headDim := c.HeadDim
	if headDim <= 0 && c.Heads > 0 {
		headDim = c.Hidden / c.Heads
	}
	row := int64(max(headDim, 0)) * elem // one head of one position
	if plan.IsKVQ4(kv) && kernel.CheckKVQ4(headDim) == nil {
		row = int64(kernel.KVQ4RowBytes(headDim))
	}
	perPos := 2 * int64(max(c.Layers, 0)) * int64(max(c.KVHeads, 0)) * row
	if perPos > 0 && int64(ctx) > (1<<62)/perPos {
		return -1 // overflows: CheckAlloc refuses a negative size
	}
	return perPos * int64(ctx)
}

// hyperParams returns the config as a JSON object.
func hyperParams(c *arch.Config) (map[string]any, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("compile: hyper-parameters: %w", err)
	}
	var hp map[string]any
	if err := json.Unmarshal(b, &hp); err != nil {
		return nil, fmt.Errorf("compile: hyper-parameters: %w", err)
	}
	return hp, nil
}

// extendOf is the manifest's Extend of an artifact of c compiled for ctx
// positions: sessions may hold up to the model's trained context, and the
// rotary frequencies of longrope and dynamic scaling, which depend on the
// context, follow a rule.
func extendOf(c *arch.Config, ctx int) (*plan.Extend, error) {
	x := &plan.Extend{Max: max(c.MaxContext(), ctx)}
	s := c.RopeScaling
	if s.Type != "longrope" && s.Type != "dynamic" {
		return x, nil
	}
	if c.RopeContext != ctx {
		// frequencies fixed for another context: no rule recomputes them
		x.Max = ctx
		return x, nil
	}
	from, err := c.RopeFreqsAt(ctx)
	if err != nil {
		return nil, err
	}
	r := &plan.RopeRule{From: from, Original: cmp.Or(s.OriginalMaxPosition, c.Context)}
	if s.Type == "longrope" {
		if r.Short, err = c.RopeFreqsAt(r.Original); err != nil {
			return nil, err
		}
		if r.Long, err = c.RopeFreqsAt(r.Original + 1); err != nil {
			return nil, err
		}
	} else {
		r.Theta, r.Factor, r.RotDim = c.RopeTheta, s.Factor, 2*len(from)
	}
	x.Rope = r
	return x, nil
}

// CompileFile reads the checkpoint at path (a file, a Hugging Face folder
// or a quantized folder), finds its tokenizer and compiles it to outPath.
// It streams: each weight is read from the mapped checkpoint when it is
// written and dropped after, opts.Jobs at a time, so memory holds a few
// tensors rather than the model (except for the u8 KV cache calibration,
// which runs over the whole float32 model first).
func CompileFile(path, outPath string, opts Options) error {
	if err := output.Check(outPath, []string{path, opts.Tokenizer, opts.CalibText, opts.MMProj}, true, false); err != nil {
		return fmt.Errorf("compile: %w", err)
	}
	if err := userfile.CheckModel(path); err != nil {
		return err
	}
	release, err := output.Lock(outPath)
	if err != nil {
		return fmt.Errorf("compile: %w", err)
	}
	defer release()
	if _, err := output.RemoveStale(outPath); err != nil {
		return fmt.Errorf("compile: %w", err)
	}
	if qmodel.IsDir(path) {
		if len(opts.LoRA) > 0 {
			return fmt.Errorf("compile: %s is quantized already: merge adapters into its float checkpoint (quantize --lora, or compile --lora)", path)
		}
		return compileQuantized(path, outPath, opts)
	}
	ck, err := detect.Open(path)
	if err != nil {
		return err
	}
	defer ck.Close()
	m, err := arch.Open(ck)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	m.AllowNonFinite = opts.AllowNonFinite
	if err := rankClassifier(ck, m.Config.Pooling, opts.Pooling); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := lora.Attach(m, opts.LoRA); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	files, err := hf.Find(path, ck)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	tok := files.Tokenizer
	if opts.Tokenizer != "" {
		tok, err = hf.TokenizerFile(opts.Tokenizer)
		if err == nil {
			err = hf.Llama2CTokenizerSize(tok, m.Config.Vocab, opts.Tokenizer)
		}
		if err != nil {
			return err
		}
	} else if hf.Llama2CTokenizerSize(tok, m.Config.Vocab, path) != nil {
		// a tokenizer.bin beside a llama2.c checkpoint is used only if it
		// has the model's vocabulary
		tok = nil
	}
	src := Source{Tokenizer: tok, ChatTemplate: files.ChatTemplate, Generation: files.Generation,
		Provenance: map[string]any{"file": filepath.Base(path), "format": ck.Format()}}
	var vtok tokenizer.Tokenizer
	if tok != nil {
		if vtok, err = tok.Build(m.Config.Vocab); err != nil {
			return fmt.Errorf("compile: tokenizer (%s): %w", tok.Kind, err)
		}
	}
	if src.Vision, err = loadVision(path, ck, m.Config.Hidden, vtok, opts); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(opts.LoRA) > 0 {
		src.Provenance["lora"] = loraProvenance(opts.LoRA)
	}
	if opts.MMProj != "" {
		src.Provenance["mmproj"] = filepath.Base(opts.MMProj)
	}
	if arch.HasMTP(&m.Config) {
		// a checkpoint whose head cannot be read (a converter that dropped
		// its tensors) compiles without it, and the provenance says why
		if head, err := arch.LoadMTP(ck, &m.Config); err != nil {
			src.Provenance["mtp"] = "not compiled: " + err.Error()
		} else {
			src.MTP = &MTPInput{Graph: head.Graph, Weights: head.Weights}
		}
	}
	floats := func() (graph.Weights, error) {
		w := graph.Weights{}
		for _, n := range m.Names() {
			v, err := m.Read(n)
			if err != nil {
				return nil, err
			}
			w[n] = v
		}
		return w, nil
	}
	ws := WeightSource(archSource{s: m})
	if f, ok := ck.(*gguf.File); ok && opts.GGUFWeights != GGUFFloat32 {
		ws = &ggufSource{archSource: archSource{s: m}, f: f}
	}
	if err := compileModel(m.Config, ws, floats, src, opts, outPath); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// carryAdapters resolves the adapters of specs against the model of
// config c for an artifact to carry, mapped onto its rotated weights by
// rot (nil: none).
func carryAdapters(c *arch.Config, specs []lora.Named, rot *rotate.AdapterMap) ([]CarriedAdapter, error) {
	var out []CarriedAdapter
	for _, sp := range specs {
		if sp.Name == "" || strings.ContainsAny(sp.Name, ":/\\") {
			return nil, fmt.Errorf("compile: adapter name %q: want a name without ':', '/' or '\\'", sp.Name)
		}
		ls, err := lora.RotatedLinears(c, sp.Path, sp.Scale, rot)
		if err != nil {
			return nil, fmt.Errorf("compile: adapter %s: %w", sp.Name, err)
		}
		out = append(out, CarriedAdapter{Ref: plan.AdapterRef{Name: sp.Name, Source: filepath.Base(filepath.Clean(sp.Path)), Scale: sp.Scale}, Linears: ls})
	}
	return out, nil
}

// loraProvenance records the merged adapters: each one's file or folder
// name and scale.
func loraProvenance(specs []lora.Spec) []any {
	var l []any
	for _, sp := range specs {
		l = append(l, map[string]any{"adapter": filepath.Base(filepath.Clean(sp.Path)), "scale": sp.Scale})
	}
	return l
}

// archSource serves a checkpoint's weights, read when asked for.
type archSource struct{ s *arch.Source }

func (a archSource) Weight(name string) (Weight, error) {
	v, err := a.s.Read(name)
	return Weight{Values: v}, err
}

// ggufSource serves a GGUF file's weights, keeping the block-quantized
// ones that feed a linear or an embedding step quantized (see
// GGUFConversionOf).
type ggufSource struct {
	archSource
	f        *gguf.File
	matrices map[string]bool // weights used only as linear or embedding matrices
}

// useGraph records which weights g uses only as linear or embedding
// matrices.
func (s *ggufSource) useGraph(g *graph.Graph) { s.matrices = matrixWeights(g) }

// matrixWeights returns the weights g uses only as linear or embedding
// matrices.
func matrixWeights(g *graph.Graph) map[string]bool {
	matrices := map[string]bool{}
	other := map[string]bool{}
	for _, n := range g.Nodes {
		if n.Weight == "" {
			continue
		}
		if n.Op == op.Linear || n.Op == op.Embed {
			matrices[n.Weight] = true
		} else {
			other[n.Weight] = true
		}
		for _, w := range append([]string{n.Bias}, n.More...) {
			other[w] = true
		}
	}
	for w := range other {
		delete(matrices, w)
	}
	return matrices
}

// halfSource serves the weights of another source, storing the binary16
// ones (half reports them: a quantized folder's tensors of scheme f16)
// that the graph uses only as linear or embedding matrices as binary16
// rows (Weight.F16Rows) rather than widened to float32.
type halfSource struct {
	WeightSource
	shapes   map[string][]int
	matrices map[string]bool
	half     func(name string) bool
}

func (h halfSource) Weight(name string) (Weight, error) {
	w, err := h.WeightSource.Weight(name)
	sh := h.shapes[name]
	if err != nil || !h.matrices[name] || len(sh) != 2 || !h.half(name) || w.Values == nil {
		return w, err
	}
	return halfRows(w, sh[0], sh[1]), nil
}

// halfRows returns w (float32 values of a [rows, cols] matrix) as binary16
// rows when every value is a binary16 value, else w unchanged.
func halfRows(w Weight, rows, cols int) Weight {
	if len(w.Values) != rows*cols {
		return w
	}
	h := quant.EncodeF16(w.Values)
	for i, v := range w.Values {
		if tensor.F16ToF32(h[i]) != v {
			return w
		}
	}
	return Weight{Quantized: &quant.Quantized{Scheme: quant.Scheme{Kind: quant.KindF16}, Rows: rows, Cols: cols, Half: h},
		F16Rows: true, Release: w.Release}
}

func (s *ggufSource) Weight(name string) (Weight, error) {
	src, ok := s.s.TensorName(name)
	shape := s.s.Shapes[name]
	if s.s.Adjust[name] != nil {
		return s.merged(name, src, shape)
	}
	if !ok || !s.matrices[name] || len(shape) != 2 {
		return s.archSource.Weight(name)
	}
	if typ, ok := s.f.TensorType(src); ok && typ == gguf.TypeF16 {
		return s.half(name, shape[0], shape[1])
	}
	q, err := ggufQuantized(s.f, src, shape[0], shape[1])
	if err != nil {
		return Weight{}, err
	}
	if q == nil {
		return s.archSource.Weight(name)
	}
	return Weight{Quantized: q, Release: func() { format.Release(s.f, src) }}, nil
}

// merged serves a weight an adapter merges into: the merged float32
// values, requantized when the file stores the weight block-quantized
// and the graph uses it only as a matrix, so that the merged artifact
// keeps the base's speed: to Q4_0 blocks when its type stays 4-bit in
// the artifact (Q4_0, Q4_1, Q4_K), else to 8 bits as compile stores the
// other block types.
func (s *ggufSource) merged(name, src string, shape []int) (Weight, error) {
	w, err := s.archSource.Weight(name)
	if err != nil || !s.matrices[name] || len(shape) != 2 || shape[1]%32 != 0 {
		return w, err
	}
	typ, ok := s.f.TensorType(src)
	if !ok || typ.BlockSize() <= 1 {
		return w, nil
	}
	rows, cols := shape[0], shape[1]
	var q *quant.Quantized
	if k, ok := ggufKept[typ]; ok && !k.tablesOnly && strings.HasPrefix(k.scheme, "q4") {
		q, err = fromBlocks(gguf.TypeQ4_0, gguf.QuantizeQ4_0(w.Values), rows, cols, false)
	} else {
		q, err = quant.QuantizeW8(w.Values, rows, cols)
	}
	if err != nil {
		return Weight{}, fmt.Errorf("tensor %q merged with its adapter: %w", src, err)
	}
	return Weight{Quantized: q}, nil
}

// half serves a GGUF F16 matrix as binary16 rows, when the values the
// checkpoint reader gives (after its reordering) are all binary16 values
// still; otherwise (a reader that rescales them) as float32.
func (s *ggufSource) half(name string, rows, cols int) (Weight, error) {
	w, err := s.archSource.Weight(name)
	if err != nil {
		return w, err
	}
	return halfRows(w, rows, cols), nil
}

// specialIDsInVocab refuses a BOS or EOS id outside the model's
// vocabulary, naming the field the checkpoint declares it in (-1 is "no
// BOS").
func specialIDsInVocab(c *arch.Config) error {
	bos, eos := "bos_token_id", "eos_token_id"
	switch c.Source {
	case "hf":
		bos, eos = "config.json: "+bos, "config.json: "+eos
	case "gguf":
		bos, eos = "gguf: metadata tokenizer.ggml.bos_token_id", "gguf: metadata tokenizer.ggml.eos_token_id"
	}
	if c.BOS < -1 || c.BOS >= c.Vocab {
		return fmt.Errorf("%s %d is outside the vocabulary of %d tokens", bos, c.BOS, c.Vocab)
	}
	for i, e := range c.EOS {
		if e < 0 || e >= c.Vocab {
			name := eos
			if len(c.EOS) > 1 {
				name = fmt.Sprintf("%s[%d]", eos, i)
			}
			return fmt.Errorf("%s %d is outside the vocabulary of %d tokens", name, e, c.Vocab)
		}
	}
	return nil
}

// rankClassifier refuses a reranker GGUF that keeps only the classifier's
// yes and no rows (cls.output.weight) without the classifier itself: its
// scores would come from the tied embeddings instead.
func rankClassifier(ck format.Checkpoint, declared, chosen string) error {
	if cmp.Or(chosen, declared) != plan.PoolRank || ck.Format() != "gguf" {
		return nil
	}
	var cls, out bool
	for _, t := range ck.Tensors() {
		cls = cls || t.Name == "cls.output.weight"
		out = out || t.Name == "output.weight"
	}
	if cls && !out {
		return fmt.Errorf("the reranker GGUF holds only its classifier's yes and no rows (cls.output.weight), not the classifier (output.weight): compile the Hugging Face checkpoint")
	}
	return nil
}

// checkQ4Heads refuses a 4-bit KV cache for a graph whose causal
// attention has a head dimension the Walsh-Hadamard rotation cannot take
// (not a power of two).
func checkQ4Heads(g *graph.Graph, kv string) error {
	for i := range g.Nodes {
		a := g.Nodes[i].Attn
		if a == nil || a.Bidirectional || g.Nodes[i].Op != op.Attention {
			continue
		}
		if err := kernel.CheckKVQ4(a.HeadDim); err != nil {
			return fmt.Errorf("compile: --kv %s: layer %d: %w", kv, a.Layer, err)
		}
	}
	return nil
}
