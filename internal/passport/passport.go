// Package passport is a quantized model's quality record: the perplexity
// of each phase measured (the float model, its quantize-dequantize
// simulation, the compiled artifact) on a named text, with the KL
// divergence and top-1 agreement of each phase against the float model,
// and the recipe that made it. `aotlm quantize --passport TEXT` measures
// it into the quantized folder's manifest, `compile` carries it into the
// artifact's, `inspect` prints it and `serve` lists it under
// /v1/models. Manifests hold it as raw JSON, so this package is the one
// place that reads it.
package passport

import (
	"encoding/json"
	"fmt"
	"io"
)

// Phase is one phase's scores over the passport's text.
type Phase struct {
	// Name is "float", "qdq", "npu" or "artifact".
	Name string  `json:"phase"`
	PPL  float64 `json:"ppl"`
	// KL is the mean KL divergence from the float model in nats, and
	// SameTop1 the share of tokens whose top-1 token is the float
	// model's (0 and 1 for the float phase itself).
	KL       float64 `json:"kl"`
	SameTop1 float64 `json:"same_top1"`
}

// Passport is the record of one measurement.
type Passport struct {
	Recipe string `json:"recipe"`
	// Text is the base name of the measured text file and TextSHA256 the
	// SHA-256 of its bytes.
	Text       string `json:"text"`
	TextSHA256 string `json:"text_sha256"`
	// Ctx, Chunks and Tokens are the scoring rule's (llama.cpp's:
	// chunks of Ctx tokens, the second half of each scored).
	Ctx    int     `json:"ctx"`
	Chunks int     `json:"chunks"`
	Tokens int     `json:"tokens"`
	Phases []Phase `json:"phases"`
}

// Parse reads a stored passport; nil input (a manifest without one) gives
// nil and no error.
func Parse(raw json.RawMessage) (*Passport, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var p Passport
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("passport: %w", err)
	}
	if len(p.Phases) == 0 {
		return nil, fmt.Errorf("passport: no phases")
	}
	for i, ph := range p.Phases {
		if ph.Name == "" || !(ph.PPL > 0) {
			return nil, fmt.Errorf("passport: phases[%d]: want a name and a positive perplexity, have %q and %v", i, ph.Name, ph.PPL)
		}
	}
	return &p, nil
}

// WriteText prints the passport as a few aligned lines.
func (p *Passport) WriteText(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "passport: recipe %s, text %s (sha256 %.12s), ctx %d, %d chunks, %d tokens scored\n",
		p.Recipe, p.Text, p.TextSHA256, p.Ctx, p.Chunks, p.Tokens); err != nil {
		return err
	}
	base := p.Phases[0].PPL
	for _, ph := range p.Phases {
		if _, err := fmt.Fprintf(w, "  %-9s ppl %.4f (%+.2f%%)  KL %.5f  same top-1 %.2f%%\n",
			ph.Name, ph.PPL, 100*(ph.PPL/base-1), ph.KL, 100*ph.SameTop1); err != nil {
			return err
		}
	}
	return nil
}
