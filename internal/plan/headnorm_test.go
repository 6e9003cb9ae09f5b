package plan

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/op"
)

// headNormPlan is handPlan with a head_rms_norm step (2 heads of 4) on the
// rope output feeding attention's q.
func headNormPlan() *Plan {
	p := handPlan()
	p.Buffers = append(p.Buffers, Buffer{Rows: 4, Cols: 8, Offset: 128}) // 6 head norm
	p.Arena = 128 + 32
	st := Step{Op: op.HeadRMSNorm, In: []int{2}, Out: 6, Weights: []string{"qnorm"}, Eps: 1e-6, HeadDim: 4}
	p.Steps = append(p.Steps[:3], append([]Step{st}, p.Steps[3:]...)...)
	p.Steps[4].In = []int{6, 1, 1}
	return p
}

func headShapes(name string) ([]int64, bool) {
	if name == "qnorm" {
		return []int64{4}, true
	}
	return handShapes(name)
}

func TestHeadRMSNormPlan(t *testing.T) {
	p := headNormPlan()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := p.CheckWeights(headShapes); err != nil {
		t.Fatal(err)
	}
	b, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"op":"head_rms_norm"`) || !strings.Contains(string(b), `"head_dim":4`) {
		t.Fatalf("head_rms_norm is not encoded by name with its head size: %s", b)
	}
	q, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if q.Steps[3].Op != op.HeadRMSNorm || q.Steps[3].HeadDim != 4 {
		t.Fatalf("decoded step %+v", q.Steps[3])
	}
}

func TestHeadRMSNormRefused(t *testing.T) {
	for _, c := range []struct {
		name, field string
		mut         func(p *Plan)
	}{
		{"zero head size", "steps[3].head_dim", func(p *Plan) { p.Steps[3].HeadDim = 0 }},
		{"head size not dividing", "steps[3].head_dim", func(p *Plan) { p.Steps[3].HeadDim = 3 }},
		// no weight is a gain of 1 + offset (Gemma 4's v); two are too many
		{"two weights", "steps[3].weights", func(p *Plan) { p.Steps[3].Weights = append(p.Steps[3].Weights, "qnorm") }},
		{"nan eps", "steps[3].attrs", func(p *Plan) { p.Steps[3].Eps = float32(math.NaN()) }},
	} {
		p := headNormPlan()
		c.mut(p)
		err := p.Validate()
		var pe *Error
		if !errors.As(err, &pe) || pe.Field != c.field {
			t.Errorf("%s: got %v, want an error on %s", c.name, err, c.field)
		}
	}
	p := headNormPlan()
	err := p.CheckWeights(func(name string) ([]int64, bool) {
		if name == "qnorm" {
			return []int64{8}, true // a row-wide gain, not a per-head one
		}
		return handShapes(name)
	})
	var pe *Error
	if !errors.As(err, &pe) || pe.Field != "steps[3].weights[0]" {
		t.Errorf("wrong gain shape: got %v", err)
	}
}
