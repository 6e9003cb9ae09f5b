package score

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/aotlm/aotlm/internal/passport"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/userfile"
)

// PassportPhases are the phases a passport measures: the float model,
// its quantize-dequantize simulation and the artifact compiled as aotlm
// compile does by default.
var PassportPhases = []string{"float", "qdq", "artifact"}

// MeasurePassport scores the text file at textPath with the quantized
// folder dir in PassportPhases (chunks of ctx tokens, at most chunks of
// them, 0: all) and returns the passport of what it measured.
func MeasurePassport(dir, textPath string, ctx, chunks, threads int) (*passport.Passport, error) {
	man, err := qmodel.ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	r, err := quant.ParseRecipe(man.Recipe)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	b, err := userfile.ReadFile(textPath, userfile.Text.Named("passport text"))
	if err != nil {
		return nil, fmt.Errorf("passport: %w", err)
	}
	o := PhaseOptions{Model: dir, Activations: "int8", Phases: PassportPhases, Ctx: ctx, Threads: threads}
	res, err := Phases(o, string(b), TextOptions{Ctx: ctx, Chunks: chunks})
	if err != nil {
		return nil, fmt.Errorf("passport: %w", err)
	}
	sum := sha256.Sum256(b)
	p := &passport.Passport{Recipe: r.Name, Text: filepath.Base(textPath), TextSHA256: hex.EncodeToString(sum[:]),
		Ctx: res[0].Ctx, Chunks: res[0].Chunks, Tokens: res[0].Tokens}
	for i, ph := range res {
		p.Phases = append(p.Phases, passport.Phase{Name: PassportPhases[i], PPL: ph.PPL, KL: ph.KL, SameTop1: ph.Top1})
	}
	return p, nil
}

// StorePassport measures the passport of the quantized folder dir (see
// MeasurePassport) and stores it in the folder's manifest.
func StorePassport(dir, textPath string, ctx, chunks, threads int) (*passport.Passport, error) {
	p, err := MeasurePassport(dir, textPath, ctx, chunks, threads)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("passport of %s: %w", dir, err)
	}
	if err := qmodel.SetPassport(dir, raw); err != nil {
		return nil, err
	}
	return p, nil
}
