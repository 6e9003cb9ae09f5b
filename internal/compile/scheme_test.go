package compile

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/quant"
)

// TestSchemeTableComplete: every quant scheme has compile's entry; its
// weights, packed, take the layout the scheme's descriptor names, of the
// plan family registered for that scheme; and every ggml type a scheme
// says it keeps converts to it.
func TestSchemeTableComplete(t *testing.T) {
	r := rand.New(rand.NewPCG(44, 44))
	const rows, cols = 4, 512
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	for _, info := range quant.Schemes() {
		ws, ok := weightSchemes[info.Kind]
		if !ok || ws.layout == nil {
			t.Errorf("%s: no compile entry", info.Kind)
			continue
		}
		q, err := quant.Quantize(w, rows, cols, quant.Scheme{Kind: info.Kind, Block: info.DefaultBlock, Sym: true})
		if err != nil {
			t.Fatal(err)
		}
		e := encodeWeight("w", []int{rows, cols}, mapWeight{Quantized: q, F16Rows: true}, true)
		if e.err != nil || e.data == nil {
			t.Fatalf("%s: layout %q, %v", info.Kind, e.layout, e.err)
		}
		want := strings.NewReplacer("B", strconv.Itoa(info.DefaultBlock), "G", strconv.Itoa(info.DefaultBlock)).Replace(info.Layout)
		if e.layout != want {
			t.Errorf("%s: layout %q, the descriptor says %q", info.Kind, e.layout, want)
		}
		l, err := plan.ParseLayout(e.layout)
		if err != nil || l.Kind.Scheme() != string(info.Kind) {
			t.Errorf("%s: layout %q is of scheme %q (%v)", info.Kind, e.layout, l.Kind.Scheme(), err)
		}
		p, err := l.Parts(rows, cols)
		if err != nil || p.Size != int64(len(e.data)) {
			t.Errorf("%s: %d bytes, layout %s needs %+v (%v)", info.Kind, len(e.data), e.layout, p, err)
		}
		// the descriptor's bits leave out at most a float32 per row
		if bits := float64(8*len(e.data)) / float64(rows*cols); bits < info.Bits || bits > info.Bits+32.0/cols {
			t.Errorf("%s: %g bits a weight in %s, the descriptor says %g", info.Kind, bits, e.layout, info.Bits)
		}
		if info.GGML != "" {
			found := false
			for _, g := range ws.gguf {
				found = found || g.typ.String() == info.GGML
			}
			if !found {
				t.Errorf("%s: keeps %s blocks, compile converts none", info.Kind, info.GGML)
			}
		}
	}
	for typ, g := range ggufKept {
		if g.convert == nil || g.scheme == "" {
			t.Errorf("%v: incomplete conversion", typ)
		}
		bs := int(typ.BlockSize())
		raw := make([]byte, 2*512/bs*int(typ.BlockBytes()))
		q, err := g.convert(raw, 2, 512)
		if err != nil {
			t.Fatalf("%v: %v", typ, err)
		}
		if ws := weightSchemes[q.Scheme.Kind]; ws == nil || !slicesHasType(ws.gguf, g) {
			t.Errorf("%v converts to %s, whose entry does not list it", typ, q.Scheme.Kind)
		}
	}
}

func slicesHasType(gs []ggufBlocks, g ggufBlocks) bool {
	for _, x := range gs {
		if x.typ == g.typ {
			return true
		}
	}
	return false
}

// mapWeight is a WeightSource of one weight.
type mapWeight Weight

func (m mapWeight) Weight(string) (Weight, error) { return Weight(m), nil }
