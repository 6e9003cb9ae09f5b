package plan

import (
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
	return nil
}
