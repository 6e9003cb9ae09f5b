package plan

import (
	"encoding/json"
	"fmt"
	"slices"
)

// ManifestFormat identifies manifests written by this package's schema.
const ManifestFormat = "aotlm-model/1"

// Manifest is the artifact's JSON manifest: what the model is, where it
// came from, how to tokenize for it, and which plans it carries.
type Manifest struct {
	Format       string         `json:"format"` // ManifestFormat
	Architecture string         `json:"architecture"`
	HyperParams  map[string]any `json:"hyper_params,omitempty"`
	Provenance   map[string]any `json:"provenance,omitempty"`
	Tokenizer    *TokenizerRef  `json:"tokenizer,omitempty"`
	ChatTemplate string         `json:"chat_template,omitempty"`
	BOS          int            `json:"bos"` // -1 if none
	EOS          []int          `json:"eos,omitempty"`
	Vocab        int            `json:"vocab"`
	Ctx          int            `json:"ctx"` // KV cache positions
	Plans        []PlanRef      `json:"plans"`
	// Weights names the storage layout of the weights: "f32" for plain
	// row-major float32 tensors; quantized layouts add their own tags,
	// recorded per tensor in the artifact's tensor index.
	Weights string `json:"weights"`
	// KVCache is the cache storage when it is not float32; nil means f32.
	KVCache *KVCache `json:"kv_cache,omitempty"`
	// Recipe is the quantization recipe of the weights (quant.ParseRecipe
	// reads it), absent for float weights.
	Recipe json.RawMessage `json:"recipe,omitempty"`
	// Generation holds the model's generation defaults (temperature,
	// top_p, top_k, repetition_penalty, ...) as its generation_config.json
	// gives them.
	Generation map[string]any `json:"generation,omitempty"`
}

// WeightsMixed is the manifest's weights tag when some tensors use a
// quantized layout (named per tensor in the artifact's tensor index).
const WeightsMixed = "mixed"

// KVCacheU8 is the dtype of a uint8 cache: each value x is stored as
// u = clamp(round_half_even(x/s), -127, 127) + 128 and read back as
// float32(int(u)-128) * s, with a scale s fixed at compile time per layer
// and per key/value head (or one per layer), shared by all positions.
const KVCacheU8 = "u8"

// KVCacheF16 is the dtype of an IEEE binary16 cache: values are rounded to
// nearest even on write; it has no scales.
const KVCacheF16 = "f16"

// KVCache describes a quantized KV cache.
type KVCache struct {
	DType string `json:"dtype"` // KVCacheU8 or KVCacheF16
	// K and V hold the scales, [layer][1] (per layer) or [layer][G] (per
	// key/value head of that layer's attention).
	K [][]float32 `json:"k_scales,omitempty"`
	V [][]float32 `json:"v_scales,omitempty"`
}

// validate checks the dtype and that the scales are finite, non-negative
// and given for the same layers.
func (c *KVCache) validate() error {
	if c.DType == KVCacheF16 {
		if len(c.K) != 0 || len(c.V) != 0 {
			return errf("manifest.kv_cache", "an f16 cache has no scales")
		}
		return nil
	}
	if c.DType != KVCacheU8 {
		return errf("manifest.kv_cache.dtype", "%q is not %q or %q", c.DType, KVCacheU8, KVCacheF16)
	}
	if len(c.K) != len(c.V) || len(c.K) == 0 || len(c.K) > maxLayer {
		return errf("manifest.kv_cache", "%d key and %d value layers", len(c.K), len(c.V))
	}
	for _, kv := range []struct {
		name string
		s    [][]float32
	}{{"k_scales", c.K}, {"v_scales", c.V}} {
		for l, row := range kv.s {
			if len(row) == 0 || len(row) > MaxCols {
				return errf(fmt.Sprintf("manifest.kv_cache.%s[%d]", kv.name, l), "%d scales", len(row))
			}
			for h, x := range row {
				if !finite32(x) || x < 0 {
					return errf(fmt.Sprintf("manifest.kv_cache.%s[%d][%d]", kv.name, l, h), "%v is not a finite non-negative scale", x)
				}
			}
		}
	}
	return nil
}

// TokenizerRef names the blob that holds the tokenizer and its kind:
// "tokenizer.json", "sentencepiece", "llama2c", "gguf-metadata".
type TokenizerRef struct {
	Kind string `json:"kind"`
	Blob string `json:"blob"`
}

// PlanRef names the blob holding the plan for passes of ARLen tokens.
type PlanRef struct {
	ARLen int    `json:"ar_len"`
	Blob  string `json:"blob"`
}

// BlobName is the artifact blob name of the plan for AR length n.
func BlobName(n int) string { return fmt.Sprintf("plan/ar%d", n) }

// Validate checks the manifest fields the engine relies on.
func (m *Manifest) Validate() error {
	if m.Format != ManifestFormat {
		return errf("manifest.format", "%q is not %q", m.Format, ManifestFormat)
	}
	if m.Vocab < 1 || m.Vocab > MaxCols {
		return errf("manifest.vocab", "%d is outside [1, %d]", m.Vocab, MaxCols)
	}
	if m.Ctx < 1 || m.Ctx > MaxCtx {
		return errf("manifest.ctx", "%d is outside [1, %d]", m.Ctx, MaxCtx)
	}
	if m.BOS < -1 || m.BOS >= m.Vocab {
		return errf("manifest.bos", "%d is outside [-1, %d)", m.BOS, m.Vocab)
	}
	for i, e := range m.EOS {
		if e < 0 || e >= m.Vocab {
			return errf(fmt.Sprintf("manifest.eos[%d]", i), "%d is outside [0, %d)", e, m.Vocab)
		}
	}
	if len(m.Plans) == 0 {
		return errf("manifest.plans", "no plans")
	}
	var lens []int
	for i, r := range m.Plans {
		f := fmt.Sprintf("manifest.plans[%d]", i)
		if r.ARLen < 1 || r.ARLen > MaxRows {
			return errf(f+".ar_len", "%d is outside [1, %d]", r.ARLen, MaxRows)
		}
		if r.ARLen > m.Ctx {
			return errf(f+".ar_len", "%d exceeds the context %d", r.ARLen, m.Ctx)
		}
		if slices.Contains(lens, r.ARLen) {
			return errf(f+".ar_len", "AR length %d is listed twice", r.ARLen)
		}
		lens = append(lens, r.ARLen)
		if r.Blob == "" {
			return errf(f+".blob", "empty name")
		}
	}
	if !slices.Contains(lens, 1) {
		return errf("manifest.plans", "no AR-1 (decode) plan among lengths %v", lens)
	}
	if m.KVCache != nil {
		return m.KVCache.validate()
	}
	return nil
}
