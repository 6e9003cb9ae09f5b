package arch

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
)

// Model is a checkpoint resolved to a family: its config and its weights
// under canonical names, in float32.
type Model struct {
	Config  Config
	Weights graph.Weights
}

// ConfigOf reads the model config from a checkpoint's metadata. Every
// hyper-parameter must be finite: a NaN or infinite value, in the
// metadata or in what the family derives from it, is an error naming the
// field.
func ConfigOf(ck format.Checkpoint) (Config, *Family, error) {
	c, f, err := configOf(ck)
	if err == nil {
		err = finiteConfig(reflect.ValueOf(c), "")
	}
	return c, f, err
}

func configOf(ck format.Checkpoint) (Config, *Family, error) {
	meta := ck.Metadata()
	switch ck.Format() {
	case "safetensors":
		archs, _ := format.MetaStrings(meta, "architectures")
		mt, _ := format.MetaString(meta, "model_type")
		if len(archs) == 0 && mt == "" {
			return Config{}, nil, errors.New("config.json: no \"architectures\" or \"model_type\" (is config.json beside the weights?)")
		}
		f, err := familyByHF(archs, mt)
		if err != nil {
			return Config{}, nil, err
		}
		c, err := f.configHF(meta)
		if err == nil {
			err = strictHF(meta, &c)
		}
		return c, f, err
	case "gguf":
		a, ok := format.MetaString(meta, "general.architecture")
		if !ok {
			return Config{}, nil, errors.New("gguf: general.architecture is missing")
		}
		f, err := familyByGGUF(a)
		if err != nil {
			return Config{}, nil, err
		}
		if err := strictGGUF(meta, a); err != nil {
			return Config{}, f, err
		}
		c, err := f.configGGUF(meta, a)
		if err != nil {
			return c, f, err
		}
		if t, ok := format.Find(ck, "token_embd.weight"); ok && len(t.Shape) == 2 {
			c.Vocab = int(t.Shape[0])
		}
		if _, ok := format.Find(ck, "output.weight"); !ok {
			c.Tied = true
		}
		if _, ok := format.Find(ck, "rope_freqs.weight"); ok {
			ff, err := ck.ReadFloat32("rope_freqs.weight")
			if err != nil {
				return c, f, err
			}
			c.RopeFreqFactors = ff
		}
		if err := ggufLongRope(ck, &c); err != nil {
			return c, f, err
		}
		return c, f, nil
	case "llama2c":
		return llama2cConfig(meta)
	case "pytorch":
		return pytorchConfig(ck)
	}
	return Config{}, nil, fmt.Errorf("no architecture mapping for %s checkpoints", ck.Format())
}

func llama2cConfig(m map[string]any) (Config, *Family, error) {
	f, _ := familyByGGUF("llama")
	geti := func(k string) int {
		v, _ := format.MetaInt(m, k)
		return int(v)
	}
	c := Config{Family: "llama", Source: "llama2c", RopeStyle: graph.RopeInterleaved,
		Hidden: geti("dim"), FFN: geti("hidden_dim"), Layers: geti("n_layers"),
		Heads: geti("n_heads"), KVHeads: geti("n_kv_heads"), Vocab: geti("vocab_size"),
		Context: geti("seq_len"), NormEps: 1e-5, RopeTheta: 10000, BOS: 1, EOS: []int{2}}
	if c.Heads > 0 {
		c.HeadDim = c.Hidden / c.Heads
	}
	if b, ok := m["shared_classifier"].(bool); ok {
		c.Tied = b
	}
	return c, f, nil
}

// Load resolves a checkpoint: its config, and every weight the family's
// graph needs, read as float32 and checked against the expected shape.
// It holds the whole model in float32; Open reads it tensor by tensor.
func Load(ck format.Checkpoint) (*Model, error) {
	src, err := Open(ck)
	if err != nil {
		return nil, err
	}
	w := graph.Weights{}
	for _, name := range src.Names() {
		if w[name], err = src.Read(name); err != nil {
			return nil, err
		}
	}
	return &Model{Config: src.Config, Weights: w}, nil
}

// Source is a checkpoint resolved to a family whose weights are read one
// at a time, so that a caller going through them in turn holds one tensor
// in float32 instead of the model. It reads from the checkpoint, which
// must stay open while the Source is used. Read is safe for concurrent use
// when the checkpoint is (every format reader is).
type Source struct {
	Config Config
	// Shapes holds every weight the family's graph needs, under its
	// canonical name.
	Shapes map[string][]int

	// AllowNonFinite lets Read return NaN and infinite values, which it
	// refuses by default.
	AllowNonFinite bool

	// Adjust, when set, changes the named weights as Read reads them, in
	// place, in the checkpoint's layout (before any conversion to the
	// graph's): a low-rank adapter merged into the weights. The names
	// are canonical.
	Adjust map[string]func(v []float32) error

	ck     format.Checkpoint
	fam    *Family
	names  map[string]string // canonical name -> checkpoint name
	loaded graph.Weights     // families with their own loader read eagerly
}

// Open resolves a checkpoint's config and checks that it holds every
// weight the family's graph needs with the expected shape; the values are
// read by Read. Families with their own loader (RWKV-7, whose tensors are
// reshaped) are read whole here.
func Open(ck format.Checkpoint) (*Source, error) {
	c, f, err := ConfigOf(ck)
	if err != nil {
		return nil, err
	}
	if err := f.check(&c); err != nil {
		return nil, err
	}
	g, err := f.build(&c, BuildOptions{AllLogits: true})
	if err != nil {
		return nil, err
	}
	s := &Source{Config: c, Shapes: g.Weights, ck: ck, fam: f}
	if f.load != nil {
		if s.loaded, err = f.load(ck, &c, g); err != nil {
			return nil, err
		}
		s.Config = c
		return s, nil
	}
	source := c.Source
	s.names = map[string]string{}
	for _, name := range s.Names() {
		shape := g.Weights[name]
		src, ok := f.tensorNames(source, name)
		if !ok {
			return nil, fmt.Errorf("%s: no %s name for tensor %q", c.Family, source, name)
		}
		info, ok := format.Find(ck, src)
		if !ok {
			hint := ""
			if name == "lm_head.weight" {
				hint = " (set tie_word_embeddings if the classifier shares the embeddings)"
			}
			return nil, fmt.Errorf("%s checkpoint has no tensor %q%s", ck.Format(), src, hint)
		}
		if f.storedShape != nil {
			shape = f.storedShape(&c, name, shape)
		}
		if !shapeIs(info.Shape, shape) {
			return nil, fmt.Errorf("tensor %q has shape %v, the config implies %v", src, info.Shape, shape)
		}
		s.names[name] = src
	}
	if err := extraLayers(ck, &c, s.names); err != nil {
		return nil, err
	}
	return s, nil
}

// extraLayers refuses a checkpoint holding tensors of more layers than its
// config declares: a tensor named like the model's layer tensors (the
// same text before the layer number) whose number is past the declared
// count would otherwise be dropped without a word.
func extraLayers(ck format.Checkpoint, c *Config, used map[string]string) error {
	prefixes := map[string]bool{}
	for _, src := range used {
		if p, _, ok := layerIndex(src); ok {
			prefixes[p] = true
		}
	}
	blocks := c.Layers
	if c.DeltaNet != nil && c.Source == "gguf" {
		blocks += c.DeltaNet.MTPLayers // GGUF counts the MTP blocks, which come last
	}
	// kinds are the layer tensors the graph reads in some layer, by their
	// name without the layer number
	kinds := map[string]bool{}
	for _, src := range used {
		if k := layerKind(src); k != "" {
			kinds[k] = true
		}
	}
	for _, t := range ck.Tensors() {
		p, n, ok := layerIndex(t.Name)
		if !ok || !prefixes[p] {
			continue
		}
		if n >= blocks {
			return fmt.Errorf("%s checkpoint has tensor %q of layer %d, but %s declares %d layers",
				ck.Format(), t.Name, n, layersField(ck, c), blocks)
		}
		if !kinds[layerKind(t.Name)] && !unusedLayerTensor(t.Name) && (c.DeltaNet == nil || n < c.Layers) {
			return fmt.Errorf("%s checkpoint has tensor %q, of a kind no layer of the %s model its config declares has (a flag such as attention_bias disagrees with the weights)",
				ck.Format(), t.Name, c.Family)
		}
	}
	return nil
}

// unusedLayerTensor reports whether a layer tensor no family reads is
// known to carry nothing of the model: rotary tables older exporters saved
// beside the weights, and attention masks.
func unusedLayerTensor(name string) bool {
	for _, s := range []string{"rotary_emb.inv_freq", ".attn_rot_embd", ".attn.masked_bias", ".attn.bias"} {
		if strings.HasSuffix(name, s) || strings.HasSuffix(name, s+".weight") {
			return true
		}
	}
	return false
}

// layerIndex splits a tensor name at its first all-digit segment:
// "model.layers.12.mlp.up_proj.weight" is "model.layers.", 12.
func layerIndex(name string) (prefix string, n int, ok bool) {
	prefix, n, _, ok = layerParts(name)
	return prefix, n, ok
}

// layerKind is a layer tensor's name without its layer number
// ("model.layers.#.mlp.up_proj.weight"), or "" for a name without one.
func layerKind(name string) string {
	prefix, _, rest, ok := layerParts(name)
	if !ok {
		return ""
	}
	return prefix + "#." + rest
}

// layerParts splits a tensor name at its first all-digit segment into
// the text before it, the number and the text after it.
func layerParts(name string) (prefix string, n int, rest string, ok bool) {
	start := 0
	for start < len(name) {
		end := strings.IndexByte(name[start:], '.')
		if end < 0 {
			return "", 0, "", false // the last segment is not a layer number
		}
		seg := name[start : start+end]
		if seg != "" && strings.Trim(seg, "0123456789") == "" && len(seg) <= 9 {
			v, err := strconv.Atoi(seg)
			return name[:start], v, name[start+end+1:], err == nil
		}
		start += end + 1
	}
	return "", 0, "", false
}

// layersField names the metadata field that declares the layer count.
func layersField(ck format.Checkpoint, c *Config) string {
	switch c.Source {
	case "hf":
		if _, ok := ck.Metadata()["num_hidden_layers"]; !ok {
			return "config.json's text_config.num_hidden_layers"
		}
		return "config.json's num_hidden_layers"
	case "gguf":
		a, _ := format.MetaString(ck.Metadata(), "general.architecture")
		return "metadata " + a + ".block_count"
	case "llama2c":
		return "the header's n_layers"
	}
	return "the config"
}

// Names returns the canonical names of the weights in sorted order.
func (s *Source) Names() []string {
	names := make([]string, 0, len(s.Shapes))
	for n := range s.Shapes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Checkpoint returns the checkpoint the weights are read from.
func (s *Source) Checkpoint() format.Checkpoint { return s.ck }

// TensorName returns the name the canonical weight name has in the
// checkpoint; false for families with their own loader (whose weights
// are reshaped on load) and for names the model does not have.
func (s *Source) TensorName(name string) (string, bool) {
	src, ok := s.names[name]
	return src, ok
}

// Read returns the named weight in float32, refusing non-finite values
// unless AllowNonFinite.
// The checkpoint's mapped pages of the tensor are released afterwards (see
// format.Release); the result is a fresh slice the caller owns.
func (s *Source) Read(name string) ([]float32, error) {
	if s.loaded != nil {
		v, ok := s.loaded[name]
		if !ok {
			return nil, fmt.Errorf("%s: no tensor %s", s.Config.Family, name)
		}
		if fn := s.Adjust[name]; fn != nil {
			v = slices.Clone(v)
			if err := fn(v); err != nil {
				return nil, fmt.Errorf("adjusting %q: %w", name, err)
			}
		}
		return v, nil
	}
	src, ok := s.names[name]
	if !ok {
		return nil, fmt.Errorf("%s: no tensor %s", s.Config.Family, name)
	}
	v, err := s.ck.ReadFloat32(src)
	format.Release(s.ck, src)
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", src, err)
	}
	for i, x := range v {
		if !s.AllowNonFinite && (math.IsNaN(float64(x)) || math.IsInf(float64(x), 0)) {
			return nil, fmt.Errorf("tensor %q holds %v at index %d", src, x, i)
		}
	}
	if fn := s.Adjust[name]; fn != nil {
		if err := fn(v); err != nil {
			return nil, fmt.Errorf("adjusting %q: %w", src, err)
		}
	}
	if s.fam != nil && s.fam.convert != nil {
		if v, err = s.fam.convert(&s.Config, name, v); err != nil {
			return nil, fmt.Errorf("converting %q: %w", src, err)
		}
	}
	return v, nil
}

func shapeIs(got []int64, want []int) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != int64(want[i]) {
			return false
		}
	}
	return true
}

func floatOr(m map[string]any, key string, def float64) float64 {
	if v, ok := format.MetaFloat(m, key); ok {
		return v
	}
	return def
}

// intList reads an int or a list of ints (eos_token_id may be either).
func intList(v any) []int {
	if l, ok := format.List(v); ok {
		v = l
	}
	switch x := v.(type) {
	case []any:
		var out []int
		for _, e := range x {
			if f, ok := format.MetaInt(map[string]any{"v": e}, "v"); ok {
				out = append(out, int(f))
			}
		}
		return out
	case nil:
		return nil
	default:
		if f, ok := format.MetaInt(map[string]any{"v": x}, "v"); ok {
			return []int{int(f)}
		}
	}
	return nil
}
