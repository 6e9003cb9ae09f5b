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
	// Extend, when set, lets sessions hold more positions than Ctx, up to
	// the model's trained context; nil: at most Ctx.
	Extend *Extend   `json:"extend,omitempty"`
	Plans  []PlanRef `json:"plans"`
	// Weights names the storage layout of the weights: "f32" for plain
	// row-major float32 tensors; quantized layouts add their own tags,
	// recorded per tensor in the artifact's tensor index.
	Weights string `json:"weights"`
	// KVCache is the cache storage when it is not float32; nil means f32.
	KVCache *KVCache `json:"kv_cache,omitempty"`
	// Recipe is the quantization recipe of the weights (quant.ParseRecipe
	// reads it), absent for float weights.
	Recipe json.RawMessage `json:"recipe,omitempty"`
	// Rotation records the rotations folded into the weights (R1, R2:
	// internal/rotate's Report, with the norm gains R1 folded), which
	// run-time adapters for the unrotated model are mapped through;
	// absent when none was folded.
	Rotation json.RawMessage `json:"rotation,omitempty"`
	// Generation holds the model's generation defaults (temperature,
	// top_p, top_k, repetition_penalty, ...) as its generation_config.json
	// gives them.
	Generation map[string]any `json:"generation,omitempty"`
	// Vision, when set, is the image encoder of a vision-language model.
	Vision *Vision `json:"vision,omitempty"`
	// MTP, when set, is the model's multi-token-prediction draft head.
	MTP *MTP `json:"mtp,omitempty"`
	// Embedding, when set, makes the artifact an embedding model: its
	// text plans keep the rows their classifier reads (Plan.Hidden), and
	// Pooling says how a sequence's rows become one vector.
	Embedding *Embedding `json:"embedding,omitempty"`
	// Adapters are the low-rank adapters the artifact carries, loaded
	// at open for sessions to choose.
	Adapters []AdapterRef `json:"adapters,omitempty"`
	// Passport is the quality record of the quantized folder the
	// artifact was compiled from (internal/passport reads it), absent
	// when none was measured.
	Passport json.RawMessage `json:"passport,omitempty"`
}

// Pooling methods of an embedding model: the mean of the sequence's
// rows, its first row, or its last; PoolRank marks a reranker, which
// scores a query and a document by its logits of "yes" and "no" (Qwen3
// Reranker) and keeps no hidden rows.
const (
	PoolMean = "mean"
	PoolCLS  = "cls"
	PoolLast = "last"
	PoolRank = "rank"
)

// Embedding describes how an embedding model pools its hidden rows.
type Embedding struct {
	Pooling string `json:"pooling"` // PoolMean, PoolCLS, PoolLast or PoolRank
}

// ValidPooling reports whether p names a pooling method.
func ValidPooling(p string) bool { return p == PoolMean || p == PoolCLS || p == PoolLast }

// MTP describes a multi-token-prediction draft head compiled beside the
// model (Qwen3.5's): its plans, one per AR length (AR-1 among them, blobs
// named by MTPBlobName), read token ids and, in a rows step, rows of the
// target's hidden state (the rows its classifier reads, which every text
// plan then exposes as Plan.Hidden), and write draft logits; they also
// expose their own classifier input as Plan.Hidden. The head has its own
// cache layers (float32 whatever KVCache says) and no recurrent state.
type MTP struct {
	Plans []PlanRef `json:"plans"`
}

// MTPBlobName is the artifact blob name of the draft head's plan for AR
// length n.
func MTPBlobName(n int) string { return fmt.Sprintf("plan/mtp/ar%d", n) }

// validate checks the draft head's plan list as Validate checks the
// model's.
func (t *MTP) validate(ctx int) error {
	if len(t.Plans) == 0 {
		return errf("manifest.mtp.plans", "no plans")
	}
	var lens []int
	for i, r := range t.Plans {
		f := fmt.Sprintf("manifest.mtp.plans[%d]", i)
		if r.ARLen < 1 || r.ARLen > MaxRows || r.ARLen > ctx {
			return errf(f+".ar_len", "%d is outside [1, %d]", r.ARLen, min(MaxRows, ctx))
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
		return errf("manifest.mtp.plans", "no AR-1 plan among lengths %v", lens)
	}
	return nil
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

// KVCacheQ4 is the dtype of a 4-bit cache: each key and value head of a
// position is rotated by the orthonormal Walsh-Hadamard transform of the
// head dimension (a power of two) and stored in groups of 32 values (the
// head dimension when smaller), 4-bit codes with a binary16 step and
// offset per group (kernel.QuantizeKVQ4). Queries are rotated the same
// way, and each head's attention output is rotated back. It has no
// scales.
const KVCacheQ4 = "q4"

// KVCacheQ4V is the dtype of a 4-bit cache whose value rows are rotated
// as KVCacheQ4's and whose key rows are stored as they are (no rotation
// of keys or queries), in the same rows.
const KVCacheQ4V = "q4v"

// IsKVQ4 reports whether dtype is one of the 4-bit caches.
func IsKVQ4(dtype string) bool { return dtype == KVCacheQ4 || dtype == KVCacheQ4V }

// KVCache describes a quantized KV cache.
type KVCache struct {
	DType string `json:"dtype"` // KVCacheU8, KVCacheF16, KVCacheQ4 or KVCacheQ4V
	// K and V hold the scales, [layer][1] (per layer) or [layer][G] (per
	// key/value head of that layer's attention).
	K [][]float32 `json:"k_scales,omitempty"`
	V [][]float32 `json:"v_scales,omitempty"`
	// KMean and VMean are a 4-bit cache's centers, [layer][G*E] (per
	// key/value head of that layer's attention, its E channels): the mean
	// key (after the rotary embedding) and value of a calibration pass.
	// The center is subtracted from every key and value before it is
	// stored, and VMean added back to the attention output; a constant key
	// shift moves all scores of a query alike, so neither changes the
	// attention's result, only what the 4-bit rows have to span. Absent,
	// the rows are stored uncentered.
	KMean [][]float32 `json:"k_means,omitempty"`
	VMean [][]float32 `json:"v_means,omitempty"`
}

// validate checks the dtype and that the scales are finite, non-negative
// and given for the same layers.
func (c *KVCache) validate() error {
	if c.DType == KVCacheF16 || IsKVQ4(c.DType) {
		if len(c.K) != 0 || len(c.V) != 0 {
			return errf("manifest.kv_cache", "an %s cache has no scales", c.DType)
		}
		if c.DType == KVCacheF16 && (len(c.KMean) != 0 || len(c.VMean) != 0) {
			return errf("manifest.kv_cache", "an %s cache has no centers", c.DType)
		}
		return c.validateMeans()
	}
	if c.DType != KVCacheU8 {
		return errf("manifest.kv_cache.dtype", "%q is not %q, %q, %q or %q", c.DType, KVCacheU8, KVCacheF16, KVCacheQ4, KVCacheQ4V)
	}
	if len(c.KMean) != 0 || len(c.VMean) != 0 {
		return errf("manifest.kv_cache", "an %s cache has no centers", c.DType)
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

// validateMeans checks that a 4-bit cache's centers, when given, are
// finite and given for the same layers.
func (c *KVCache) validateMeans() error {
	if len(c.KMean) != len(c.VMean) || len(c.KMean) > maxLayer {
		return errf("manifest.kv_cache", "%d key and %d value center layers", len(c.KMean), len(c.VMean))
	}
	for _, kv := range []struct {
		name string
		s    [][]float32
	}{{"k_means", c.KMean}, {"v_means", c.VMean}} {
		for l, row := range kv.s {
			if len(row) > MaxCols {
				return errf(fmt.Sprintf("manifest.kv_cache.%s[%d]", kv.name, l), "%d values", len(row))
			}
			for h, x := range row {
				if !finite32(x) {
					return errf(fmt.Sprintf("manifest.kv_cache.%s[%d][%d]", kv.name, l, h), "%v is not finite", x)
				}
			}
		}
	}
	return nil
}

// TokenizerRef names the blob that holds the tokenizer and its kind:
// "tokenizer.json", "sentencepiece", "llama2c", "gguf-metadata",
// "gpt2-files" (a GPT-2 layout's files in one JSON object).
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
	if m.Vision != nil {
		if err := m.Vision.validate(); err != nil {
			return err
		}
		for piece, id := range m.Vision.Markers {
			if id >= m.Vocab {
				return errf("manifest.vision.markers", "%q has id %d, outside the vocabulary of %d", piece, id, m.Vocab)
			}
		}
	}
	if m.MTP != nil {
		if err := m.MTP.validate(m.Ctx); err != nil {
			return err
		}
	}
	if m.Extend != nil {
		if err := m.Extend.validate(m.Ctx); err != nil {
			return err
		}
	}
	if e := m.Embedding; e != nil && !ValidPooling(e.Pooling) && e.Pooling != PoolRank {
		return errf("manifest.embedding.pooling", "%q is not %q, %q, %q or %q", e.Pooling, PoolMean, PoolCLS, PoolLast, PoolRank)
	}
	if m.KVCache != nil {
		return m.KVCache.validate()
	}
	return nil
}

// Vision describes an image encoder compiled into the artifact beside the
// text model: its plans, each for images of one size, and what
// preprocessing and the prompt layout need, so that the artifact runs
// images on its own.
type Vision struct {
	// Family names the preprocessing and prompt layout ("idefics3").
	Family string `json:"family"`
	// Config is the family's encoder and preprocessing config (tile size,
	// longest edge, mean and std, patch size, tokens per image, image
	// token id), as the family's package writes it.
	Config json.RawMessage `json:"config"`
	// Markers maps the pieces of the prompt layout (such as
	// "<fake_token_around_image>" or "<row_1_col_1>") to their token ids.
	Markers map[string]int `json:"markers,omitempty"`
	// Weights is the storage of the encoder's matrices: "f32", "f16"
	// (layout f16-rows) or "w8" (8-bit rows).
	Weights string          `json:"weights"`
	Plans   []VisionPlanRef `json:"plans"`
}

// VisionPlanRef names the blob of the plan that encodes images of Height x
// Width pixels into Tokens embedding rows; Name is VisionPlanName(Height,
// Width).
type VisionPlanRef struct {
	Name   string `json:"name"`
	Height int    `json:"height"`
	Width  int    `json:"width"`
	Tokens int    `json:"tokens"`
	Blob   string `json:"blob"`
}

// maxImageSide bounds the sides of a vision plan's images.
const maxImageSide = 1 << 16

// VisionPlanName is the name of the vision plan for images of h x w
// pixels: "vision/<h>x<w>". A family with one input size has one such
// plan; one that buckets images by size has one per bucket.
func VisionPlanName(h, w int) string { return fmt.Sprintf("vision/%dx%d", h, w) }

// VisionBlobName is the artifact blob name of a vision plan.
func VisionBlobName(h, w int) string { return "plan/" + VisionPlanName(h, w) }

// validate checks the vision section's names and sizes.
func (v *Vision) validate() error {
	if v.Family == "" {
		return errf("manifest.vision.family", "empty")
	}
	if len(v.Config) == 0 || v.Config[0] != '{' {
		return errf("manifest.vision.config", "not a JSON object")
	}
	if v.Weights != "f32" && v.Weights != "f16" && v.Weights != "w8" {
		return errf("manifest.vision.weights", "%q is not f32, f16 or w8", v.Weights)
	}
	if len(v.Plans) == 0 {
		return errf("manifest.vision.plans", "no plans")
	}
	seen := map[string]bool{}
	for i, r := range v.Plans {
		f := fmt.Sprintf("manifest.vision.plans[%d]", i)
		if r.Height < 1 || r.Height > maxImageSide || r.Width < 1 || r.Width > maxImageSide {
			return errf(f, "images of %dx%d pixels are outside [1, %d]", r.Height, r.Width, maxImageSide)
		}
		if r.Name != VisionPlanName(r.Height, r.Width) {
			return errf(f+".name", "%q is not %q", r.Name, VisionPlanName(r.Height, r.Width))
		}
		if seen[r.Name] {
			return errf(f+".name", "%q is listed twice", r.Name)
		}
		seen[r.Name] = true
		if r.Blob == "" {
			return errf(f+".blob", "empty name")
		}
		if r.Tokens < 1 || r.Tokens > MaxRows {
			return errf(f+".tokens", "%d is outside [1, %d]", r.Tokens, MaxRows)
		}
	}
	for piece, id := range v.Markers {
		if id < 0 {
			return errf("manifest.vision.markers", "%q has id %d", piece, id)
		}
	}
	return nil
}
