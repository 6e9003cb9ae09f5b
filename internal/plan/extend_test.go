package plan

import (
	"strings"
	"testing"
)

// TestExtendValidate checks that a manifest's extension is validated: a
// maximum below the compiled context or above MaxCtx, and rope rules with
// missing, mismatched or non-positive frequencies, are refused naming
// the field; good longrope and dynamic rules pass.
func TestExtendValidate(t *testing.T) {
	f := []float64{1, 0.1, 0.01, 0.001}
	good := func() *Manifest {
		return &Manifest{Format: ManifestFormat, Vocab: 16, Ctx: 32, BOS: -1, Plans: []PlanRef{{ARLen: 1, Blob: "p"}},
			Extend: &Extend{Max: 256, Rope: &RopeRule{From: f, Original: 64, Theta: 1e4, Factor: 4, RotDim: 8}}}
	}
	if err := good().Validate(); err != nil {
		t.Fatalf("a dynamic rule: %v", err)
	}
	m := good()
	m.Extend.Rope = &RopeRule{From: f, Original: 64, Short: f, Long: []float64{2, 0.2, 0.02, 0.002}}
	if err := m.Validate(); err != nil {
		t.Fatalf("a longrope rule: %v", err)
	}
	for _, c := range []struct {
		field string
		edit  func(*Extend)
	}{
		{"extend.max", func(x *Extend) { x.Max = 16 }},
		{"extend.max", func(x *Extend) { x.Max = MaxCtx + 1 }},
		{"extend.rope.from", func(x *Extend) { x.Rope.From = nil }},
		{"extend.rope.from", func(x *Extend) { x.Rope.From = []float64{1, -1, 0.1, 0.01} }},
		{"extend.rope.original", func(x *Extend) { x.Rope.Original = 0 }},
		{"extend.rope.rot_dim", func(x *Extend) { x.Rope.RotDim = 6 }},
		{"extend.rope", func(x *Extend) { x.Rope.Factor = 0.5 }},
		{"extend.rope.long", func(x *Extend) { x.Rope.Short = f }},
		{"extend.rope.short", func(x *Extend) { x.Rope.Short, x.Rope.Long = f[:3], f }},
	} {
		m := good()
		c.edit(m.Extend)
		if err := m.Validate(); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v, want an error naming it", c.field, err)
		}
	}
}

// TestRopeRuleFreqs checks the rule's choice: longrope's short factors up
// to the original context and long ones beyond it; dynamic NTK's
// frequencies unchanged while both contexts are within the original one,
// and for a longer context pair i scaled by (b_ctx/b_n)^(2i/R).
func TestRopeRuleFreqs(t *testing.T) {
	short, long := []float64{1, 0.5}, []float64{0.9, 0.3}
	r := &RopeRule{From: short, Original: 64, Short: short, Long: long}
	if got := r.Freqs(32, 64); got[0] != 1 || got[1] != 0.5 {
		t.Errorf("longrope at the original context: %v, want the short set", got)
	}
	if got := r.Freqs(32, 65); got[0] != 0.9 || got[1] != 0.3 {
		t.Errorf("longrope past the original context: %v, want the long set", got)
	}
	d := &RopeRule{From: []float64{1, 0.1}, Original: 64, Theta: 100, Factor: 2, RotDim: 4}
	if got := d.Freqs(32, 64); got[0] != 1 || got[1] != 0.1 {
		t.Errorf("dynamic within the original context: %v", got)
	}
	// base at 128: 100 * (2*128/64 - 1)^(4/2) = 900, and pair 1 is
	// 900^(-2/4) = 1/30
	got := d.Freqs(32, 128)
	if want := 1.0 / 30; got[0] != 1 || got[1] < want*(1-1e-12) || got[1] > want*(1+1e-12) {
		t.Errorf("dynamic at 128: %v, want [1 %v]", got, want)
	}
}
