package vlm

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/testutil"
)

// BenchmarkEncodeTile encodes one tile (patch rows to connector output)
// with the compiled vision plan (f32 and w8 weights) and with the graph
// interpreter, on 2 threads: on the fixture's shape and on SmolVLM-256M's
// (SigLIP 512x512, patch 16, 768 wide, 12 layers of 12 heads, FFN 3072,
// pixel shuffle 4, text width 576; random weights, the speed does not
// depend on their values). Run with -benchtime=1x: a 256M tile is
// seconds. Measured on the shared 2-core EPYC (load ~7, two runs each):
// compiled f32 5.7-6.2 s, compiled w8 2.6-2.7 s, interpreter 11.4-12.1 s
// per 512x512 tile.
func BenchmarkEncodeTile(b *testing.B) {
	dir := testutil.Path(b, "vlm/smolvlm")
	ck, err := detect.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	text, err := arch.Load(ck)
	ck.Close()
	if err != nil {
		b.Fatal(err)
	}
	m, err := Open(dir, 2)
	if err != nil {
		b.Fatal(err)
	}
	big := arch.VisionConfig{ImageSize: 512, PatchSize: 16, Channels: 3, Hidden: 768, FFN: 3072, Layers: 12, Heads: 12,
		NormEps: 1e-6, ScaleFactor: 4, TextHidden: 576, Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5},
		LongestEdge: 2048, ImageTokenID: 1}
	shapes := []struct {
		name string
		vc   arch.VisionConfig
		w    func() graph.Weights
	}{
		{"fixture", m.VLM.Vision, func() graph.Weights { return m.VLM.VisionWeights }},
		{"smolvlm-256m", big, func() graph.Weights { return randomVision(b, &big) }},
	}
	for _, sh := range shapes {
		vc := sh.vc
		var w graph.Weights
		weights := func() graph.Weights {
			if w == nil {
				w = sh.w()
			}
			return w
		}
		n := vc.Grid() * vc.Grid()
		r := rand.New(rand.NewPCG(1, 2))
		rows := make([]float32, n*vc.Channels*vc.PatchSize*vc.PatchSize)
		for i := range rows {
			rows[i] = float32(r.Float64()*2 - 1)
		}
		order := vc.PatchOrder()
		for _, vw := range []string{"f32", "w8"} {
			b.Run(sh.name+"/compiled-"+vw, func(b *testing.B) {
				g, err := arch.BuildVision(&vc)
				if err != nil {
					b.Fatal(err)
				}
				cfg, _ := json.Marshal(vc)
				path := filepath.Join(b.TempDir(), "v.aot")
				tg, err := arch.Build(&text.Config, arch.BuildOptions{})
				if err != nil {
					b.Fatal(err)
				}
				in := compile.Input{Graph: tg, Weights: text.Weights, Ctx: 64,
					Manifest: textManifest(text), Vision: &compile.VisionInput{Graph: g, Weights: weights(),
						Family: "idefics3", Config: cfg, Weights8: vw == "w8",
						Sizes: []compile.VisionSize{{Height: vc.ImageSize, Width: vc.ImageSize, Rows: n}}}}
				if err := compile.Compile(in, path); err != nil {
					b.Fatal(err)
				}
				e, err := engine.OpenWith(path, engine.Options{Threads: 2})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				enc, err := e.NewEncoder(e.VisionPlans()[0].Name, 2)
				if err != nil {
					b.Fatal(err)
				}
				defer enc.Close()
				b.ResetTimer()
				for range b.N {
					if _, err := enc.Encode(rows, order); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(sh.name+"/interpreter", func(b *testing.B) {
			g, err := arch.BuildVision(&vc)
			if err != nil {
				b.Fatal(err)
			}
			it, err := graph.NewInterpreter(g, weights(), 2)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if _, _, err := it.RunInput(it.NewState(n), graph.Input{IDs: order, Rows: rows}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// randomVision returns random weights of vc's encoder: N(0, 1/fan_in)
// matrices, unit norm gains, small biases and position embeddings.
func randomVision(b *testing.B, vc *arch.VisionConfig) graph.Weights {
	g, err := arch.BuildVision(vc)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	w := graph.Weights{}
	for name, shape := range g.Weights {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		sd := 0.02
		if len(shape) == 2 {
			sd = 1 / math.Sqrt(float64(shape[1]))
		}
		for i := range v {
			v[i] = float32(r.NormFloat64() * sd)
		}
		if len(shape) == 1 && len(name) > 7 && name[len(name)-7:] == ".weight" {
			for i := range v {
				v[i] = 1
			}
		}
		w[name] = v
	}
	return w
}

// textManifest is the manifest of a text model compiled for a benchmark.
func textManifest(m *arch.Model) plan.Manifest {
	return plan.Manifest{Architecture: m.Config.Family, BOS: -1, Vocab: m.Config.Vocab}
}
