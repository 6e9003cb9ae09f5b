package quant

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/aotlm/aotlm/internal/limits"
	"github.com/aotlm/aotlm/internal/userfile"
	"io"
	"path"
	"regexp"
	"strings"
)

// A recipe is a JSON object:
//
//	{
//	  "name": "w4a16-lpbq",
//	  "default": {"scheme": "lpbq", "block": 32, "mode": "refined"},
//	  "overrides": [
//	    {"pattern": "lm_head.weight", "scheme": "w8"},
//	    {"pattern": "re:(^|\\.)(v_proj|attn_v)\\.weight$", "scheme": "w8"}
//	  ],
//	  "activations": {"dtype": "a16", "fake_quant": false},
//	  "kv": "u8"
//	}
//
// A scheme object has "scheme" (lpbq, w8, q4, q6k, f16) and, by scheme:
//
//	lpbq: "block" (16, 32, 64, 128; default 32), "mode" (refined | reference; default refined)
//	q4:   "group" or "block" (16, 32, 64, 128; default 32), "sym" (default true), "hqq" (default false)
//	w8, q6k, f16: nothing else (q6k needs widths that are multiples of 256:
//	        with the fallback on, narrower-grained tensors become w8)
//
// and, for any scheme, "float_input": true keeps the weight's input in
// float32 when the model is compiled for int8 activations (Scheme.FloatInput).
//
// Fields a scheme does not take are errors, as are unknown fields anywhere.
// Omitted fields take the defaults of the override's own scheme, not those of
// "default". An override's "pattern" is a glob (path.Match syntax: * ? [..])
// matched against the whole tensor name, or, when it starts with "re:", a Go
// regular expression matched anywhere in the name (anchor it with ^ and $).
// "activations.dtype" is a16 (16-bit activations) or int8-dynamic (int8 per
// block at run time); "fake_quant" asks evaluation to simulate the NPU's
// static 16-bit activations. "kv" is f16 or u8; both default to the first.

// ActDType is how activations are represented at run time.
type ActDType string

// The activation types.
const (
	ActA16         ActDType = "a16"
	ActInt8Dynamic ActDType = "int8-dynamic"
)

// KVDType is the element type of the KV cache.
type KVDType string

// The KV cache types.
const (
	KVF16 KVDType = "f16"
	KVU8  KVDType = "u8"
)

// Activations is the activation part of a recipe.
type Activations struct {
	DType     ActDType `json:"dtype"`
	FakeQuant bool     `json:"fake_quant"`
}

// Override applies Scheme to the tensors whose names match Pattern.
type Override struct {
	Pattern string
	Scheme  Scheme
	re      *regexp.Regexp // compiled "re:" pattern, set by NewOverride
}

// NewOverride returns an override after checking its pattern and scheme.
func NewOverride(pattern string, s Scheme) (Override, error) {
	o := Override{Pattern: pattern, Scheme: s}
	if err := o.compile(); err != nil {
		return Override{}, err
	}
	if err := s.Validate(); err != nil {
		return Override{}, err
	}
	return o, nil
}

// compile checks the pattern and keeps a compiled regular expression.
func (o *Override) compile() error {
	if o.Pattern == "" {
		return &RecipeError{Field: "pattern", Msg: "empty pattern"}
	}
	if expr, ok := strings.CutPrefix(o.Pattern, "re:"); ok {
		re, err := regexp.Compile(expr)
		if err != nil {
			return &RecipeError{Field: "pattern", Msg: fmt.Sprintf("bad regular expression: %v", err)}
		}
		o.re = re
		return nil
	}
	if _, err := path.Match(o.Pattern, ""); err != nil {
		return &RecipeError{Field: "pattern", Msg: fmt.Sprintf("bad glob %q: %v", o.Pattern, err)}
	}
	return nil
}

// Matches reports whether the override applies to the tensor name. A bad
// pattern matches nothing. Overrides from NewOverride, ParseRecipe, Preset or
// a validated Recipe hold their regular expression compiled; others compile it
// on each call.
func (o Override) Matches(name string) bool {
	if expr, ok := strings.CutPrefix(o.Pattern, "re:"); ok {
		re := o.re
		if re == nil {
			var err error
			if re, err = regexp.Compile(expr); err != nil {
				return false
			}
		}
		return re.MatchString(name)
	}
	ok, err := path.Match(o.Pattern, name)
	return err == nil && ok
}

// Calibration is the part of a recipe computed from calibration text.
type Calibration struct {
	// AWQ searches activation-aware per-channel scales (AWQScales) over
	// AWQGrid strengths (0: 20).
	AWQ     bool `json:"awq,omitempty"`
	AWQGrid int  `json:"awq_grid,omitempty"`
	// SmoothAlpha > 0 migrates activation outliers into the weights
	// (SmoothScales) with that alpha.
	SmoothAlpha float64 `json:"smooth_alpha,omitempty"`
	// GPTQ chooses the integers with GPTQ (QuantizeGPTQ), dampening the
	// inputs' second moment by GPTQDamp of its mean diagonal (0: 0.01).
	GPTQ     bool    `json:"gptq,omitempty"`
	GPTQDamp float64 `json:"gptq_damp,omitempty"`
	// GPTQActOrder quantizes the columns in decreasing order of input
	// energy (GPTQOptions.ActOrder).
	GPTQActOrder bool `json:"gptq_act_order,omitempty"`
	// GPTQRefit is the number of rounds of scale re-fitting after GPTQ
	// (quant.GPTQOptions.Refit): the scales, and LPBQ's block codes, are
	// fitted to the output error with the integers held, then GPTQ runs
	// again on the new grid. 0: none.
	GPTQRefit int `json:"gptq_refit,omitempty"`
	// GridSearch chooses each block's scale (LPBQ code, q4 or w8 scale)
	// to minimize the error weighted by the inputs' mean square
	// (SearchGrid), before GPTQ if both are on.
	GridSearch bool `json:"grid_search,omitempty"`
	// Sequential recollects each linear's input statistics on the model
	// whose earlier linears are already quantized (one calibration pass
	// per input), so GPTQ and the grid search see their predecessors'
	// error.
	Sequential bool `json:"sequential,omitempty"`
	// Outliers > 0 keeps, for each linear that computes with int8
	// activations, up to that fraction of its input channels in float
	// (at least one): those whose calibrated max |x| is at least
	// OutlierRatio (0: 8) times the median channel's. The int8 linear
	// reads the input with those channels zeroed and a float linear over
	// them is added (mllm's shadow outlier execution).
	Outliers     float64 `json:"outliers,omitempty"`
	OutlierRatio float64 `json:"outlier_ratio,omitempty"`
}

// Needed reports whether any calibrated method is selected.
func (c Calibration) Needed() bool {
	return c.AWQ || c.SmoothAlpha > 0 || c.GPTQ || c.GridSearch || c.Outliers > 0
}

// RotationKind selects an orthogonal rotation.
type RotationKind string

// The rotations.
const (
	RotationNone     RotationKind = ""
	RotationHadamard RotationKind = "hadamard"        // the normalized Walsh-Hadamard matrix
	RotationRandom   RotationKind = "random-hadamard" // Hadamard times a seeded random +-1 diagonal
)

// Rotation selects the rotations folded into the weights before
// quantization: R1 on the residual stream, R2 per attention head between
// the value and output projections; and the online ones the model then
// computes (hadamard only): R3 on q and k after RoPE, R4 on down_proj's
// input.
type Rotation struct {
	R1   RotationKind `json:"r1,omitempty"`
	R2   RotationKind `json:"r2,omitempty"`
	R3   RotationKind `json:"r3,omitempty"`
	R4   RotationKind `json:"r4,omitempty"`
	Seed int64        `json:"seed,omitempty"`
}

// Vision weight storages of a vision-language model's image encoder
// (Vision.Weights).
const (
	VisionF32 = "f32" // float32
	VisionF16 = "f16" // linear matrices as IEEE binary16 rows
	VisionW8  = "w8"  // linear matrices as 8-bit rows, one scale per row
)

// Vision says how a vision-language model's image encoder is stored when
// the model is compiled: its linear matrices in Weights (VisionF32,
// VisionF16 or VisionW8; "" leaves the compiler's default). The text
// model's schemes do not apply to the encoder.
type Vision struct {
	Weights string `json:"weights,omitempty"`
}

// Recipe says how to quantize each tensor of a model, and how activations,
// the KV cache and a vision encoder are stored.
type Recipe struct {
	Name        string
	Default     Scheme
	Overrides   []Override
	Activations Activations
	KV          KVDType
	Calibration Calibration
	Rotation    Rotation
	Vision      Vision
}

// SchemeFor returns the scheme of the tensor name: that of the first override
// (in recipe order) whose pattern matches, else the default. Put the most
// specific patterns first.
func (r Recipe) SchemeFor(name string) Scheme {
	for _, o := range r.Overrides {
		if o.Matches(name) {
			return o.Scheme
		}
	}
	return r.Default
}

// OverrideFor returns the scheme of the first override whose pattern
// matches name, and false when none does (the default is not consulted).
func (r Recipe) OverrideFor(name string) (Scheme, bool) {
	for _, o := range r.Overrides {
		if o.Matches(name) {
			return o.Scheme, true
		}
	}
	return Scheme{}, false
}

// Validate checks every part of r; the error is a *RecipeError naming the
// field ("default.block", "overrides[2].pattern", "kv", ...).
func (r *Recipe) Validate() error {
	if err := r.Default.Validate(); err != nil {
		return prefixField(err, "default")
	}
	for i := range r.Overrides {
		at := fmt.Sprintf("overrides[%d]", i)
		if err := r.Overrides[i].compile(); err != nil {
			return prefixField(err, at)
		}
		if err := r.Overrides[i].Scheme.Validate(); err != nil {
			return prefixField(err, at)
		}
	}
	switch r.Activations.DType {
	case ActA16, ActInt8Dynamic:
	default:
		return &RecipeError{Field: "activations.dtype", Msg: fmt.Sprintf("unknown activation type %q (want a16 or int8-dynamic)", string(r.Activations.DType))}
	}
	switch r.KV {
	case KVF16, KVU8:
	default:
		return &RecipeError{Field: "kv", Msg: fmt.Sprintf("unknown kv type %q (want f16 or u8)", string(r.KV))}
	}
	switch r.Vision.Weights {
	case "", VisionF32, VisionF16, VisionW8:
	default:
		return &RecipeError{Field: "vision.weights", Msg: fmt.Sprintf("unknown vision weights %q (want %s, %s or %s)", r.Vision.Weights, VisionF32, VisionF16, VisionW8)}
	}
	c := r.Calibration
	if c.AWQGrid < 0 || c.AWQGrid > 1000 {
		return &RecipeError{Field: "calibration.awq_grid", Msg: fmt.Sprintf("%d is not in 0..1000", c.AWQGrid)}
	}
	if !(c.SmoothAlpha >= 0 && c.SmoothAlpha <= 1) {
		return &RecipeError{Field: "calibration.smooth_alpha", Msg: fmt.Sprintf("%v is not in [0, 1]", c.SmoothAlpha)}
	}
	if !(c.Outliers >= 0 && c.Outliers <= 0.5) {
		return &RecipeError{Field: "calibration.outliers", Msg: fmt.Sprintf("%v is not a fraction of channels in [0, 0.5]", c.Outliers)}
	}
	if !(c.OutlierRatio == 0 || (c.OutlierRatio >= 1 && c.OutlierRatio <= 1e6)) {
		return &RecipeError{Field: "calibration.outlier_ratio", Msg: fmt.Sprintf("%v is not in [1, 1e6]", c.OutlierRatio)}
	}
	if c.Outliers > 0 && c.Sequential {
		return &RecipeError{Field: "calibration.outliers", Msg: "outlier channels and sequential calibration do not combine"}
	}
	if c.GPTQRefit < 0 || c.GPTQRefit > 100 {
		return &RecipeError{Field: "calibration.gptq_refit", Msg: fmt.Sprintf("%d is not in 0..100", c.GPTQRefit)}
	}
	if c.GPTQRefit > 0 && !c.GPTQ {
		return &RecipeError{Field: "calibration.gptq_refit", Msg: "re-fitting scales after GPTQ needs \"gptq\": true"}
	}
	if !(c.GPTQDamp >= 0 && c.GPTQDamp < 1) {
		return &RecipeError{Field: "calibration.gptq_damp", Msg: fmt.Sprintf("%v is not in [0, 1)", c.GPTQDamp)}
	}
	for _, k := range []struct {
		field string
		v     RotationKind
	}{{"rotation.r1", r.Rotation.R1}, {"rotation.r2", r.Rotation.R2}} {
		switch k.v {
		case RotationNone, RotationHadamard, RotationRandom:
		default:
			return &RecipeError{Field: k.field, Msg: fmt.Sprintf("unknown rotation %q (want hadamard or random-hadamard)", string(k.v))}
		}
	}
	for _, k := range []struct {
		field string
		v     RotationKind
	}{{"rotation.r3", r.Rotation.R3}, {"rotation.r4", r.Rotation.R4}} {
		switch k.v {
		case RotationNone, RotationHadamard:
		default:
			return &RecipeError{Field: k.field, Msg: fmt.Sprintf("rotation %q: the online rotations are computed at run time and take only hadamard", string(k.v))}
		}
	}
	return nil
}

// RecipeError reports a recipe that cannot be used, naming the field.
type RecipeError struct {
	File  string // recipe file, if read from one
	Field string // JSON path of the bad field, e.g. "overrides[1].block"
	Msg   string
}

func (e *RecipeError) Error() string {
	var b strings.Builder
	b.WriteString("recipe")
	if e.File != "" {
		b.WriteString(" " + e.File)
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// prefixField prepends prefix to the field of a *RecipeError.
func prefixField(err error, prefix string) error {
	var re *RecipeError
	if !errors.As(err, &re) {
		return err
	}
	out := *re
	if out.Field == "" {
		out.Field = prefix
	} else {
		out.Field = prefix + "." + out.Field
	}
	return &out
}

// MaxRecipeSize bounds the size of a recipe file.
const MaxRecipeSize = limits.MaxRecipeFile

// LoadRecipe reads and validates a recipe file.
func LoadRecipe(file string) (Recipe, error) {
	data, err := userfile.ReadFile(file, userfile.Recipe)
	if err != nil {
		return Recipe{}, err
	}
	r, err := ParseRecipe(data)
	if err != nil {
		var re *RecipeError
		if errors.As(err, &re) {
			re.File = file
		}
		return Recipe{}, err
	}
	return r, nil
}

// ParseRecipe decodes and validates a recipe from JSON. Errors are
// *RecipeError naming the field.
func ParseRecipe(data []byte) (Recipe, error) {
	if len(data) > MaxRecipeSize {
		return Recipe{}, &RecipeError{Msg: fmt.Sprintf("larger than %d bytes", MaxRecipeSize)}
	}
	var raw rawRecipe
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return Recipe{}, jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Recipe{}, &RecipeError{Msg: fmt.Sprintf("trailing data after the recipe object at byte %d", dec.InputOffset())}
	}
	return raw.recipe()
}

// jsonError turns an encoding/json error into a *RecipeError naming the field
// where json says which.
func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return &RecipeError{Msg: fmt.Sprintf("invalid JSON at byte %d: %v", syn.Offset, err)}
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "(top level)"
		}
		return &RecipeError{Field: field, Msg: fmt.Sprintf("want a JSON %s, got %s", jsonKind(typ.Type.Kind().String()), typ.Value)}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &RecipeError{Msg: "truncated or empty JSON"}
	}
	msg := err.Error()
	if i := strings.Index(msg, "unknown field "); i >= 0 {
		name := strings.Trim(msg[i+len("unknown field "):], `"`)
		return &RecipeError{Field: name, Msg: "unknown field"}
	}
	return &RecipeError{Msg: msg}
}

// jsonKind names a Go kind as JSON users know it.
func jsonKind(k string) string {
	switch k {
	case "int", "int64", "float64":
		return "number"
	case "bool":
		return "boolean"
	case "slice":
		return "array"
	case "struct", "ptr", "map":
		return "object"
	}
	return k
}
