package qmodel

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/userfile"
)

// ManifestName is the manifest's file name inside a quantized folder.
const ManifestName = "aotlm-quant.json"

// WeightsName is the safetensors file inside a quantized folder.
const WeightsName = "model.safetensors"

// FormatVersion is the folder layout version this package writes.
const FormatVersion = 1

// Manifest describes a quantized folder.
type Manifest struct {
	FormatVersion int             `json:"format_version"`
	Config        arch.Config     `json:"config"`
	Recipe        json.RawMessage `json:"recipe"` // quant.ParseRecipe reads it
	Source        string          `json:"source"`
	// Tokenizer is the tokenizer file in the folder ("" : the folder's HF
	// tokenizer files, if any).
	Tokenizer string                 `json:"tokenizer,omitempty"`
	Tensors   map[string]TensorEntry `json:"tensors"`
	// Calibration records the calibration and equivalent rewrites applied
	// before quantization (rotations, scales, GPTQ), when any.
	Calibration json.RawMessage `json:"calibration,omitempty"`
	// Outliers gives, by linear weight W, the input channels kept in
	// float: W's columns there are zero and the float tensor
	// W + graph.OutlierSuffix holds them (graph.SplitOutliers).
	Outliers map[string][]int `json:"outliers,omitempty"`
	// LoRA lists the adapters merged into the weights before they were
	// quantized (quantize --lora), each one's file or folder name and
	// scale, in order.
	LoRA []MergedAdapter `json:"lora,omitempty"`
	// Files names every file aotlm wrote in the folder, the manifest
	// included: quantize --force replaces a folder that holds these and
	// nothing else.
	Files []string `json:"files,omitempty"`
	// Passport is the folder's quality record (internal/passport reads
	// it), set by quantize --passport.
	Passport json.RawMessage `json:"passport,omitempty"`
}

// TensorEntry is how one canonical tensor is stored.
type TensorEntry struct {
	// Scheme is the quant scheme; Float marks a tensor kept as float32.
	Scheme Scheme `json:"scheme"`
	Float  bool   `json:"float,omitempty"`
	Shape  []int  `json:"shape"`
	Padded bool   `json:"padded,omitempty"`
	// Fallback names why the recipe's scheme was replaced.
	Fallback string `json:"fallback,omitempty"`
	// GPTQ marks integers chosen by GPTQ (the grid is the scheme's own).
	GPTQ bool `json:"gptq,omitempty"`
}

// IsDir reports whether path is a quantized folder.
func IsDir(path string) bool {
	_, err := os.Stat(filepath.Join(path, ManifestName))
	return err == nil
}

// OwnedFiles returns the names of the files aotlm wrote in the existing
// quantized folder dir, which replacing it may remove: its manifest's
// "files", or for a manifest without them the names quantize writes. An
// empty folder owns nothing; a folder without a manifest is refused.
func OwnedFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("output: %w", err)
	}
	if len(ents) == 0 {
		return nil, nil
	}
	b, err := userfile.ReadFile(filepath.Join(dir, ManifestName), userfile.Config.Named("manifest"))
	if err != nil {
		return nil, fmt.Errorf("output %s is not a quantized folder aotlm wrote (%v): remove it or choose another output", dir, err)
	}
	var m struct {
		Files     []string `json:"files"`
		Tokenizer string   `json:"tokenizer"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("output %s: %s: %w", dir, ManifestName, err)
	}
	if m.Files == nil {
		m.Files = append([]string{ManifestName, WeightsName, TokenizerGGUF, "tokenizer.bin"}, hfTokenizerFiles...)
		if m.Tokenizer != "" {
			m.Files = append(m.Files, m.Tokenizer)
		}
	}
	var owned []string
	for _, f := range m.Files {
		// names only: a manifest naming "../x" owns nothing outside
		if f != "" && f != "." && f != ".." && !strings.ContainsAny(f, `/\`) {
			owned = append(owned, f)
		}
	}
	if !slices.Contains(owned, ManifestName) {
		owned = append(owned, ManifestName)
	}
	return owned, nil
}

// ReadManifest reads and checks the manifest of a quantized folder.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := userfile.ReadFile(filepath.Join(dir, ManifestName), userfile.Config.Named("manifest"))
	if err != nil {
		return nil, fmt.Errorf("quantized model: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("quantized model %s: %s: %w", dir, ManifestName, err)
	}
	if m.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("quantized model %s: format version %d, this aotlm reads %d", dir, m.FormatVersion, FormatVersion)
	}
	if err := m.Config.Validate(); err != nil {
		return nil, fmt.Errorf("quantized model %s: %w", dir, err)
	}
	for name, e := range m.Tensors {
		if !e.Float {
			if err := e.Scheme.Quant().Validate(); err != nil {
				return nil, fmt.Errorf("quantized model %s: tensor %q: %w", dir, name, err)
			}
		}
	}
	return &m, nil
}

// Scheme is quant.Scheme in a form JSON reads back.
type Scheme struct {
	Kind  string `json:"kind"`
	Block int    `json:"block,omitempty"`
	Sym   bool   `json:"sym,omitempty"`
	HQQ   bool   `json:"hqq,omitempty"`
	Mode  string `json:"mode,omitempty"`
	// FloatInput is quant.Scheme.FloatInput.
	FloatInput bool `json:"float_input,omitempty"`
}

// SchemeOf converts a quant.Scheme.
func SchemeOf(s quant.Scheme) Scheme {
	return Scheme{Kind: string(s.Kind), Block: s.Block, Sym: s.Sym, HQQ: s.HQQ, Mode: string(s.Mode), FloatInput: s.FloatInput}
}

// Quant converts back to a quant.Scheme.
func (s Scheme) Quant() quant.Scheme {
	return quant.Scheme{Kind: quant.Kind(s.Kind), Block: s.Block, Sym: s.Sym, HQQ: s.HQQ, Mode: quant.LPBQMode(s.Mode), FloatInput: s.FloatInput}
}

// MergedAdapter is an adapter merged into a quantized folder's weights.
type MergedAdapter struct {
	Adapter string  `json:"adapter"`
	Scale   float64 `json:"scale"`
}

// SetPassport stores the quality record raw in the manifest of the
// quantized folder dir, replacing the manifest through a temporary file.
func SetPassport(dir string, raw json.RawMessage) error {
	m, err := ReadManifest(dir)
	if err != nil {
		return err
	}
	m.Passport = raw
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("quantized model %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".manifest-*")
	if err != nil {
		return fmt.Errorf("quantized model %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("quantized model %s: %w", dir, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("quantized model %s: %w", dir, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("quantized model %s: %w", dir, err)
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, ManifestName))
}
