package arch

import (
	"fmt"
	"maps"
	"strings"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/graph"
)

// The EmbeddingGemma family: Gemma 3's text block run as an encoder. Its
// attention is bidirectional, a sliding layer seeing the positions at
// most sliding_window/2 away on either side (both llama.cpp's symmetric
// window and Hugging Face's, which lowers the configured window to
// sliding_window/2+1 and keeps |i-j| below it); the final rows are
// pooled (mean) and pass through the dense projections of the
// sentence-transformers modules (2_Dense, 3_Dense: 768 -> 3072 -> 768, no
// bias, identity activation) before the normalization. Pooling and
// dense projections commute (both linear), so the graph applies the
// projections to every row and the runtime pools them.
//
// Hugging Face: Gemma3TextModel with use_bidirectional_attention (without
// it, a causal Gemma 3 decoder without its head), the dense weights in
// the folder's modules (canonical names
// "2_Dense.linear.weight" and "3_Dense.linear.weight"). llama.cpp:
// architecture gemma-embedding, the dense weights dense_2.weight and
// dense_3.weight with gemma-embedding.dense_{2,3}_feat_{in,out}, q·k
// scaled by 1/sqrt(head_dim), the norms holding 1+w as in gemma3.

// denseWeight is the canonical name of the k-th dense projection after
// the final norm (k from 0).
func denseWeight(k int) string { return fmt.Sprintf("%d_Dense.linear.weight", k+2) }

func init() {
	register(&Family{
		Name:              "gemma-embedding",
		HFArchitectures:   []string{"Gemma3TextModel"},
		GGUFArchitectures: []string{"gemma-embedding"},
		configHF:          gemmaEmbedConfigHF,
		configGGUF:        gemmaEmbedConfigGGUF,
		tensorNames:       gemmaEmbedTensorName,
		build:             buildDecoder,
	})
}

func gemmaEmbedConfigHF(m map[string]any) (Config, error) {
	c, err := gemma3ConfigHF(m)
	if err != nil {
		return c, err
	}
	c.Family = "gemma-embedding"
	// Hugging Face's default is causal: a Gemma3TextModel without the
	// flag is Gemma 3's decoder without its head
	c.Bidirectional, _ = m["use_bidirectional_attention"].(bool)
	if p, ok := format.MetaString(m, format.MetaSentencePooling); ok {
		c.Pooling = p
	}
	dense, _ := format.List(m[format.MetaSentenceDense])
	in := c.Hidden
	for i, d := range dense {
		e, _ := d.(map[string]any)
		fi, ok1 := format.MetaInt(e, "in_features")
		fo, ok2 := format.MetaInt(e, "out_features")
		if !ok1 || !ok2 || int(fi) != in || fo < 1 {
			return c, fmt.Errorf("config.json: dense module %d: in_features %v, out_features %v (want %d in)", i, e["in_features"], e["out_features"], in)
		}
		if b, _ := e["weights_missing"].(bool); b {
			return c, fmt.Errorf("dense module %d (%v): no model.safetensors", i, e["path"])
		}
		if b, _ := e["bias"].(bool); b {
			return c, fmt.Errorf("dense module %d: a bias is not supported", i)
		}
		if a, ok := format.MetaString(e, "activation_function"); ok && a != "torch.nn.modules.linear.Identity" {
			return c, fmt.Errorf("dense module %d: activation %s is not supported (only the identity)", i, a)
		}
		c.DenseOut = append(c.DenseOut, int(fo))
		in = int(fo)
	}
	return c, nil
}

func gemmaEmbedConfigGGUF(m map[string]any, arch string) (Config, error) {
	c, err := gemma3ConfigGGUF(m, arch)
	if err != nil {
		return c, err
	}
	c.Family, c.Bidirectional, c.AttnScale = "gemma-embedding", true, 0
	switch v := m[arch+".attention.sliding_window_pattern"].(type) {
	case nil:
	case []any:
		// one flag a layer: true for a sliding layer
		if len(v) != c.Layers {
			return c, fmt.Errorf("gguf: metadata %s.attention.sliding_window_pattern has %d entries for %d layers", arch, len(v), c.Layers)
		}
		c.SlidingLayers = nil
		for l, e := range v {
			if b, ok := e.(bool); !ok {
				return c, fmt.Errorf("gguf: metadata %s.attention.sliding_window_pattern[%d] is %s, not a flag", arch, l, show(e))
			} else if b {
				c.SlidingLayers = append(c.SlidingLayers, l)
			}
		}
	default:
		n, ok := format.MetaInt(m, arch+".attention.sliding_window_pattern")
		if !ok || n < 1 {
			return c, fmt.Errorf("gguf: metadata %s.attention.sliding_window_pattern is %s, not a positive period", arch, show(v))
		}
		c.SlidingLayers = slidingLayers(c.Layers, int(n))
	}
	var dims [4]int64
	have := 0
	for i, k := range []string{"dense_2_feat_in", "dense_2_feat_out", "dense_3_feat_in", "dense_3_feat_out"} {
		if v, ok := format.MetaInt(m, arch+"."+k); ok {
			dims[i] = v
			have++
		}
	}
	switch {
	case have == 0:
	case have != 4 || dims[0] != int64(c.Hidden) || dims[1] != dims[2] || dims[1] < 1 || dims[3] != int64(c.Hidden):
		return c, fmt.Errorf("gguf: metadata %s.dense_{2,3}_feat_{in,out} are %v: want %d -> n -> %d", arch, dims, c.Hidden, c.Hidden)
	default:
		c.DenseOut = []int{int(dims[1]), int(dims[3])}
	}
	return c, nil
}

var gemmaEmbedGGUFNames = func() map[string]string {
	t := maps.Clone(gemma3GGUFNames)
	t[denseWeight(0)] = "dense_2.weight"
	t[denseWeight(1)] = "dense_3.weight"
	return t
}()

// gemmaEmbedTensorName maps a canonical (HF) tensor name to its name in
// source: a Gemma3TextModel folder stores the model's weights without
// the "model." prefix of a causal model's.
func gemmaEmbedTensorName(source, name string) (string, bool) {
	if source == "hf" {
		return strings.TrimPrefix(name, "model."), true
	}
	return sourceTensorName(source, name, gemmaEmbedGGUFNames)
}

// buildDense adds c's dense projections on the rows x.
func buildDense(g *graph.Graph, c *Config, x int) int {
	for k, n := range c.DenseOut {
		x = g.Linear(x, denseWeight(k), n, "")
	}
	return x
}
