package recipe

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/userfile"
)

// SensitivityRun says what quantize --report-sensitivity and --auto
// measure: the text file, its chunks, and the budget of --auto.
type SensitivityRun struct {
	// File is the text to measure on.
	File string
	// Tokenizer is the tokenizer file or folder ("" for the model's).
	Tokenizer            string
	Ctx, Chunks, Threads int
	// MaxSize is --auto's budget (ParseSize); "" measures only.
	MaxSize string
	// PerBit orders --auto by KL divergence per bit w8 adds.
	PerBit bool
}

// SensitivityReport is what a SensitivityRun found.
type SensitivityReport struct {
	FloatPPL float64 `json:"float_ppl"`
	Rows     []Row   `json:"tensors"`
	// Recipe, Bits and KeptW8 are --auto's choice (absent without a
	// budget).
	Recipe *quant.Recipe `json:"recipe,omitempty"`
	Bits   float64       `json:"bits_per_weight,omitempty"`
	KeptW8 []string      `json:"kept_w8,omitempty"`
}

// RunSensitivity measures each linear's sensitivity of the model at src
// under the recipe r over the run's text and, with a budget, chooses the
// linears kept at w8 within it.
func RunSensitivity(src string, r quant.Recipe, o SensitivityRun) (*SensitivityReport, error) {
	text, err := userfile.ReadFile(o.File, userfile.Text.Named("sensitivity text"))
	if err != nil {
		return nil, fmt.Errorf("--report-sensitivity: %w", err)
	}
	rows, base, err := Sensitivity(src, r, string(text), o.Tokenizer, o.Ctx, o.Chunks, o.Threads)
	if err != nil {
		return nil, err
	}
	rep := &SensitivityReport{FloatPPL: base, Rows: rows}
	if o.MaxSize == "" {
		return rep, nil
	}
	auto, bits, kept, err := AutoWithin(src, r, rows, o.MaxSize, o.PerBit)
	if err != nil {
		return nil, err
	}
	rep.Recipe, rep.Bits, rep.KeptW8 = &auto, bits, kept
	return rep, nil
}

// WriteAuto prints --auto's choice: the linears kept at w8, the
// estimated bits per weight and the recipe.
func (rep *SensitivityReport) WriteAuto(w io.Writer) error {
	rj, err := json.Marshal(rep.Recipe)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "auto: %d linears kept at w8 (%s), estimated %.2f bits per weight; recipe:\n%s\n",
		len(rep.KeptW8), strings.Join(rep.KeptW8, ", "), rep.Bits, rj)
	return err
}
