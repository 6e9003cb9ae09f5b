package engine_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
)

// f16Parts compiles the SmolVLM fixture with its encoder's matrices as
// binary16 rows (layout f16-rows) and takes the artifact apart.
func f16Parts(t *testing.T) *parts {
	dir := testutil.Path(t, "vlm/smolvlm")
	path := filepath.Join(t.TempDir(), "f16.aot")
	opts := compile.Options{ARLens: []int{4}, Ctx: 32, VisionWeights: compile.VisionF16}
	if err := compile.CompileFile(dir, path, opts); err != nil {
		t.Fatal(err)
	}
	return takeApart(t, path)
}

// TestBadF16Refused rewrites a valid artifact with a broken binary16
// weight; Open must refuse it naming the problem.
func TestBadF16Refused(t *testing.T) {
	edit := func(p *parts, f func(i int)) {
		for i, ti := range p.tensors {
			if ti.Layout == "f16-rows" {
				f(i)
				return
			}
		}
		t.Fatal("no tensor with layout f16-rows")
	}
	cases := []struct {
		name, want string
		edit       func(p *parts)
	}{
		{"short data", "bytes, layout f16-rows", func(p *parts) {
			edit(p, func(i int) { n := p.tensors[i].Name; p.data[n] = p.data[n][:len(p.data[n])-2] })
		}},
		{"long data", "bytes, layout f16-rows", func(p *parts) {
			edit(p, func(i int) { n := p.tensors[i].Name; p.data[n] = append(p.data[n], 0, 0) })
		}},
		{"dtype", "needs dtype f16", func(p *parts) { edit(p, func(i int) { p.tensors[i].DType = tensor.I8 }) }},
		{"rank", "needs dtype f16 and rank 2", func(p *parts) {
			edit(p, func(i int) { s := p.tensors[i].Shape; p.tensors[i].Shape = []int64{s[0] * s[1]} })
		}},
		{"packed", "no packed form", func(p *parts) { edit(p, func(i int) { p.tensors[i].Layout = "f16-rows-p" }) }},
		{"misspelt", "not known", func(p *parts) { edit(p, func(i int) { p.tensors[i].Layout = "f16-row" }) }},
		{"binary16 gain", "has shape [1 ", func(p *parts) {
			for i, ti := range p.tensors {
				if strings.HasSuffix(ti.Name, "post_layernorm.weight") {
					d := ti.Shape[0]
					p.tensors[i].DType, p.tensors[i].Layout, p.tensors[i].Shape = tensor.F16, "f16-rows", []int64{1, d}
					p.data[ti.Name] = make([]byte, 2*d)
					return
				}
			}
			t.Fatal("no post_layernorm gain")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := f16Parts(t)
			c.edit(p)
			e, err := engine.Open(p.write(t, t.TempDir()))
			if err == nil {
				e.Close()
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
		})
	}
	e, err := engine.Open(f16Parts(t).write(t, t.TempDir()))
	if err != nil {
		t.Fatalf("an unchanged rewrite is refused: %v", err)
	}
	e.Close()
}
