package engine_test

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/plan"
)

// TestCheckFiniteReadsQuantizedRows: a NaN or an infinity in the scale of
// a quantized weight (w8 rows, lpbq blocks), which no float in the file
// spells out, is found by dequantizing the rows, named by tensor and row;
// the untouched artifact is finite.
func TestCheckFiniteReadsQuantizedRows(t *testing.T) {
	clean := quantParts(t)
	e, err := engine.Open(clean.write(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CheckFinite(); err != nil {
		t.Errorf("clean artifact: %v", err)
	}
	e.Close()
	for _, c := range []struct {
		layout string
		scale  int // which float32 scale
		v      float32
	}{{"w8-rows", 1, float32(math.NaN())}, {"lpbq-b32", 0, float32(math.Inf(1))}} {
		p := quantParts(t)
		name, row := "", -1
		for _, ti := range p.tensors {
			if ti.Layout != c.layout {
				continue
			}
			l, err := plan.ParseLayout(ti.Layout)
			if err != nil {
				t.Fatal(err)
			}
			parts, err := l.Parts(ti.Shape[0], ti.Shape[1])
			if err != nil {
				t.Fatal(err)
			}
			name = ti.Name
			d := append([]byte(nil), p.data[name]...)
			binary.LittleEndian.PutUint32(d[parts.Scales+4*int64(c.scale):], math.Float32bits(c.v))
			p.data[name] = d
			// w8 has a scale per row: scale 1 is row 1's; scale 0 is
			// row 0's in both layouts
			row = c.scale
			break
		}
		if name == "" {
			t.Fatalf("no %s tensor", c.layout)
		}
		e, err := engine.Open(p.write(t, t.TempDir()))
		if err != nil {
			t.Fatalf("%s: %v", c.layout, err)
		}
		err = e.CheckFinite()
		e.Close()
		var nf *engine.NonFiniteError
		if !errors.As(err, &nf) || nf.Tensor != name || nf.Row != row || nf.Count < 1 {
			t.Errorf("%s scale %d = %v: %v (want tensor %s row %d)", c.layout, c.scale, c.v, err, name, row)
		}
	}
}
