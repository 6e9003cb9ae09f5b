package engine_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil/tinymodel"
)

// quantParts quantizes the tiny model with w4a16-lpbq, compiles it with a
// uint8 cache and takes the artifact apart.
func quantParts(t *testing.T) *parts {
	dir := t.TempDir()
	src, q := filepath.Join(dir, "src"), filepath.Join(dir, "q")
	if err := tinymodel.WriteLlama(src, tinymodel.Default(), 7); err != nil {
		t.Fatal(err)
	}
	r, err := quant.Preset("w4a16-lpbq")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := qmodel.Quantize(src, q, qmodel.Options{Recipe: r}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "q.aot")
	if err := compile.CompileFile(q, path, compile.Options{ARLens: []int{4}, Ctx: 32, KV: "u8", FloatActivations: true}); err != nil {
		t.Fatal(err)
	}
	return takeApart(t, path)
}

// TestBadQuantizedRefused rewrites a valid quantized artifact with a
// broken quantized tensor or cache description; Open must name it.
func TestBadQuantizedRefused(t *testing.T) {
	edit := func(p *parts, layout string, f func(i int)) {
		for i, ti := range p.tensors {
			if ti.Layout == layout {
				f(i)
				return
			}
		}
		panic("no tensor with layout " + layout)
	}
	cases := []struct {
		name, want string
		edit       func(p *parts)
	}{
		{"unknown layout", "unsupported", func(p *parts) { edit(p, "lpbq-b32", func(i int) { p.tensors[i].Layout = "lpbq-z32" }) }},
		{"short data", "bytes, layout lpbq-b32", func(p *parts) {
			edit(p, "lpbq-b32", func(i int) { n := p.tensors[i].Name; p.data[n] = p.data[n][:len(p.data[n])-4] })
		}},
		{"long data", "bytes, layout w8-rows", func(p *parts) {
			edit(p, "w8-rows", func(i int) { n := p.tensors[i].Name; p.data[n] = append(p.data[n], 0, 0, 0, 0) })
		}},
		{"dtype", "needs dtype i8", func(p *parts) { edit(p, "w8-rows", func(i int) { p.tensors[i].DType = tensor.U8 }) }},
		{"block larger", "bytes, layout lpbq-b16", func(p *parts) { edit(p, "lpbq-b32", func(i int) { p.tensors[i].Layout = "lpbq-b16" }) }},
		{"quantized gain", `weight "model.norm.weight" has shape [1 `, nil},
		{"kv dtype", "manifest.kv_cache.dtype", func(p *parts) { p.manifest["kv_cache"].(map[string]any)["dtype"] = "u4" }},
		{"kv layers", "manifest.kv_cache", func(p *parts) {
			kc := p.manifest["kv_cache"].(map[string]any)
			kc["k_scales"], kc["v_scales"] = kc["k_scales"].([]any)[:1], kc["v_scales"].([]any)[:1]
		}},
		{"kv heads", "scales for", func(p *parts) {
			kc := p.manifest["kv_cache"].(map[string]any)
			kc["k_scales"].([]any)[0] = []any{1, 2, 3}
		}},
		{"kv scale", "k_scales[0][0]", func(p *parts) {
			kc := p.manifest["kv_cache"].(map[string]any)
			kc["k_scales"].([]any)[0].([]any)[0] = -2
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := quantParts(t)
			if c.name == "quantized gain" {
				// store the final norm gain as a [1, D] w8 tensor
				for i, ti := range p.tensors {
					if ti.Name == "model.norm.weight" {
						d := ti.Shape[0]
						p.tensors[i].DType, p.tensors[i].Layout, p.tensors[i].Shape = tensor.I8, "w8-rows", []int64{1, d}
						p.data[ti.Name] = make([]byte, (d+3)/4*4+4)
					}
				}
			} else {
				c.edit(p)
			}
			e, err := engine.Open(p.write(t, t.TempDir()))
			if err == nil {
				e.Close()
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
			if c.name == "unknown layout" {
				var ue *engine.UnsupportedError
				if !errors.As(err, &ue) {
					t.Fatalf("%v is not an UnsupportedError", err)
				}
			}
		})
	}
	e, err := engine.Open(quantParts(t).write(t, t.TempDir()))
	if err != nil {
		t.Fatalf("an unchanged rewrite is refused: %v", err)
	}
	e.Close()
}

// TestKVQ4CentersRefused: a 4-bit cache compiled from the tiny model has
// centers for every layer, G*E values each, not all zero; an artifact
// whose centers miss a layer or have the wrong length is refused with a
// message naming them.
func TestKVQ4CentersRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q4.aot")
	if err := compile.CompileModel(tinyModel(t), compile.Source{}, compile.Options{ARLens: []int{4}, Ctx: 32, KV: "q4"}, path); err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	kc := e.Manifest().KVCache
	e.Close()
	if kc == nil || len(kc.KMean) == 0 || len(kc.KMean) != len(kc.VMean) {
		t.Fatalf("4-bit cache %+v: want centers for every layer", kc)
	}
	var nonzero bool
	for l := range kc.KMean {
		if len(kc.KMean[l]) != len(kc.KMean[0]) || len(kc.VMean[l]) != len(kc.KMean[0]) || len(kc.KMean[0]) == 0 {
			t.Fatalf("layer %d: %d key and %d value centers, layer 0 %d", l, len(kc.KMean[l]), len(kc.VMean[l]), len(kc.KMean[0]))
		}
		for i := range kc.KMean[l] {
			nonzero = nonzero || kc.KMean[l][i] != 0 || kc.VMean[l][i] != 0
		}
	}
	if !nonzero {
		t.Fatal("every center is 0")
	}
	for _, c := range []struct {
		name, want string
		edit       func(kc map[string]any)
	}{
		{"layers", "center layers", func(kc map[string]any) {
			kc["k_means"] = kc["k_means"].([]any)[:1]
			kc["v_means"] = kc["v_means"].([]any)[:1]
		}},
		{"length", "centers for", func(kc map[string]any) { kc["v_means"].([]any)[0] = []any{1, 2, 3} }},
	} {
		p := takeApart(t, path)
		c.edit(p.manifest["kv_cache"].(map[string]any))
		e, err := engine.Open(p.write(t, t.TempDir()))
		if err == nil {
			e.Close()
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q does not mention %q", c.name, err, c.want)
		}
	}
}
