package quant

import (
	"encoding/json"
	"fmt"
)

// rawScheme is a scheme object as written, before defaults.
type rawScheme struct {
	Scheme *string `json:"scheme"`
	Block  *int    `json:"block"`
	Group  *int    `json:"group"`
	Sym    *bool   `json:"sym"`
	HQQ    *bool   `json:"hqq"`
	Mode   *string `json:"mode"`
	// FloatInput is Scheme.FloatInput.
	FloatInput *bool `json:"float_input"`
}

type rawOverride struct {
	Pattern *string `json:"pattern"`
	rawScheme
}

type rawActivations struct {
	DType     *string `json:"dtype"`
	FakeQuant *bool   `json:"fake_quant"`
}

type rawRecipe struct {
	Name        string          `json:"name"`
	Default     *rawScheme      `json:"default"`
	Overrides   []rawOverride   `json:"overrides"`
	Activations *rawActivations `json:"activations"`
	KV          *string         `json:"kv"`
	Calibration *Calibration    `json:"calibration"`
	Rotation    *Rotation       `json:"rotation"`
	Vision      *Vision         `json:"vision"`
}

// scheme applies the defaults of the named scheme and validates the result.
func (r *rawScheme) scheme() (Scheme, error) {
	bad := func(field, msg string) error { return &RecipeError{Field: field, Msg: msg} }
	if r.Scheme == nil {
		return Scheme{}, bad("scheme", "missing scheme")
	}
	s := Scheme{Kind: Kind(*r.Scheme)}
	info, known := schemes[s.Kind]
	block := r.Block
	if r.Group != nil {
		if r.Block != nil {
			return Scheme{}, bad("group", `give "group" or "block", not both`)
		}
		if !known || !info.Group {
			return Scheme{}, bad("group", fmt.Sprintf("%s takes no group size", s.Kind))
		}
		block = r.Group
	}
	if known && info.recipe != nil {
		if err := info.recipe(&s, r.Mode, r.Sym); err != nil {
			return Scheme{}, err
		}
	} else if r.Sym != nil {
		return Scheme{}, bad("sym", fmt.Sprintf("%s takes no sym", s.Kind))
	}
	if block != nil {
		s.Block = *block
	}
	if r.Mode != nil && s.Mode == "" {
		s.Mode = LPBQMode(*r.Mode) // a scheme without modes: Validate names it
	}
	if r.HQQ != nil {
		s.HQQ = *r.HQQ
	}
	if r.FloatInput != nil {
		s.FloatInput = *r.FloatInput
	}
	if err := s.Validate(); err != nil {
		return Scheme{}, err
	}
	return s, nil
}

// recipe applies defaults and validates.
func (raw *rawRecipe) recipe() (Recipe, error) {
	r := Recipe{Name: raw.Name, Activations: Activations{DType: ActA16}, KV: KVF16}
	if raw.Default == nil {
		return Recipe{}, &RecipeError{Field: "default", Msg: "missing default scheme"}
	}
	s, err := raw.Default.scheme()
	if err != nil {
		return Recipe{}, prefixField(err, "default")
	}
	r.Default = s
	for i, o := range raw.Overrides {
		at := fmt.Sprintf("overrides[%d]", i)
		if o.Pattern == nil {
			return Recipe{}, &RecipeError{Field: at + ".pattern", Msg: "missing pattern"}
		}
		s, err := o.scheme()
		if err != nil {
			return Recipe{}, prefixField(err, at)
		}
		r.Overrides = append(r.Overrides, Override{Pattern: *o.Pattern, Scheme: s})
	}
	if a := raw.Activations; a != nil {
		if a.DType != nil {
			r.Activations.DType = ActDType(*a.DType)
		}
		if a.FakeQuant != nil {
			r.Activations.FakeQuant = *a.FakeQuant
		}
	}
	if raw.KV != nil {
		r.KV = KVDType(*raw.KV)
	}
	if raw.Calibration != nil {
		r.Calibration = *raw.Calibration
	}
	if raw.Rotation != nil {
		r.Rotation = *raw.Rotation
	}
	if raw.Vision != nil {
		r.Vision = *raw.Vision
	}
	if err := r.Validate(); err != nil {
		return Recipe{}, err
	}
	return r, nil
}

// schemeJSON is the canonical written form of a scheme.
func schemeJSON(s Scheme) map[string]any {
	m := map[string]any{"scheme": string(s.Kind)}
	if info, ok := schemes[s.Kind]; ok {
		info.json(s, m)
	}
	if s.FloatInput {
		m["float_input"] = true
	}
	return m
}

// MarshalJSON writes the scheme in recipe form, every field explicit.
func (s Scheme) MarshalJSON() ([]byte, error) { return json.Marshal(schemeJSON(s)) }

// MarshalJSON writes the override in recipe form: the pattern and the scheme
// fields side by side.
func (o Override) MarshalJSON() ([]byte, error) {
	m := schemeJSON(o.Scheme)
	m["pattern"] = o.Pattern
	return json.Marshal(m)
}

// MarshalJSON writes the recipe in the form ParseRecipe reads.
func (r Recipe) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Name        string       `json:"name"`
		Default     Scheme       `json:"default"`
		Overrides   []Override   `json:"overrides"`
		Activations Activations  `json:"activations"`
		KV          KVDType      `json:"kv"`
		Calibration *Calibration `json:"calibration,omitempty"`
		Rotation    *Rotation    `json:"rotation,omitempty"`
		Vision      *Vision      `json:"vision,omitempty"`
	}{r.Name, r.Default, r.Overrides, r.Activations, r.KV, omitZero(r.Calibration), omitZero(r.Rotation), omitZero(r.Vision)})
}

// omitZero returns nil for a zero value, so it is left out of the JSON.
func omitZero[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}
