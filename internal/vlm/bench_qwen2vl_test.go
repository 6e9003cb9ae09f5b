package vlm

import (
	"encoding/json"
	"fmt"
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

// BenchmarkEncodeQwen2VL encodes one image (patch rows to merger output)
// with the compiled vision plan of its size (f32 and w8 weights) and with
// the graph interpreter, on 2 threads, at Qwen2-VL-2B's encoder width
// (embed 1280, 16 heads, MLP 5120, patch 14, merge 2, text width 1536)
// but 2 of its 32 blocks (random weights; the speed does not depend on
// their values, and a block's time is the same at any depth), for
// 224x224 and 448x448 images (256 and 1024 patch rows). Run with
// -benchtime=1x. Figures: docs/architectures.md.
func BenchmarkEncodeQwen2VL(b *testing.B) {
	benchEncodeQwen(b, arch.Qwen2VLVision{PatchSize: 14, TemporalPatch: 2, Merge: 2, Channels: 3, Hidden: 1280, FFN: 5120, Layers: 2,
		Heads: 16, NormEps: 1e-6, RopeTheta: 10000, TextHidden: 1536, Mean: clipMeanBench, Std: clipStdBench, ImageTokenID: 1})
}

// BenchmarkEncodeQwen25VL is BenchmarkEncodeQwen2VL at Qwen2.5-VL-3B's
// encoder width (hidden 1280, 16 heads, gated SiLU MLP 3420, RMSNorm,
// text width 2048) with 2 of its 32 blocks: block 0 attends within
// windows of 112 pixels (4x4 merged tokens, 64 patch rows), block 1 over
// the whole image, as 3 of every 4 blocks and the 4th do in the model.
func BenchmarkEncodeQwen25VL(b *testing.B) {
	benchEncodeQwen(b, arch.Qwen2VLVision{PatchSize: 14, TemporalPatch: 2, Merge: 2, Channels: 3, Hidden: 1280, FFN: 3420, Layers: 2,
		Heads: 16, NormEps: 1e-6, RopeTheta: 10000, TextHidden: 2048, Mean: clipMeanBench, Std: clipStdBench, ImageTokenID: 1,
		RMSNorm: true, GatedMLP: true, WindowSize: 112, FullAttnBlocks: []int{1}})
}

// benchEncodeQwen runs the encode benchmarks for the encoder vc.
func benchEncodeQwen(b *testing.B, vc arch.Qwen2VLVision) {
	dir := testutil.Path(b, "vlm/qwen2vl")
	ck, err := detect.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	text, err := arch.Load(ck)
	ck.Close()
	if err != nil {
		b.Fatal(err)
	}
	g, err := arch.BuildQwen2VLVision(&vc)
	if err != nil {
		b.Fatal(err)
	}
	w := randomQwenVision(g)
	for _, side := range []int{224, 448} {
		n := (side / vc.PatchSize) * (side / vc.PatchSize)
		r := rand.New(rand.NewPCG(1, 2))
		pix := make([]float32, 3*side*side)
		for i := range pix {
			pix[i] = float32(r.Float64()*2 - 1)
		}
		rows, pos, _, _, err := vc.Patches(pix, side, side)
		if err != nil {
			b.Fatal(err)
		}
		for _, vw := range []string{"f32", "w8"} {
			b.Run(fmt.Sprintf("%dx%d/compiled-%s", side, side, vw), func(b *testing.B) {
				cfg, _ := json.Marshal(arch.Qwen2VLArtifact{Qwen2VLVision: vc, MinPixels: 8 * 784, MaxPixels: 4096 * 784})
				path := filepath.Join(b.TempDir(), "v.aot")
				tg, err := arch.Build(&text.Config, arch.BuildOptions{})
				if err != nil {
					b.Fatal(err)
				}
				in := compile.Input{Graph: tg, Weights: text.Weights, Ctx: 64,
					Manifest: plan.Manifest{Architecture: text.Config.Family, BOS: -1, Vocab: text.Config.Vocab},
					Vision: &compile.VisionInput{Graph: g, Weights: w, Family: "qwen2vl", Config: cfg, Weights8: vw == "w8",
						Sizes: []compile.VisionSize{{Height: side, Width: side, Rows: n}}}}
				if err := compile.Compile(in, path); err != nil {
					b.Fatal(err)
				}
				e, err := engine.OpenWith(path, engine.Options{Threads: 2})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				enc, err := e.NewEncoder(plan.VisionPlanName(side, side), 2)
				if err != nil {
					b.Fatal(err)
				}
				defer enc.Close()
				ids := make([]int, n)
				b.ResetTimer()
				for range b.N {
					if _, err := enc.EncodeAt(rows, ids, pos); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(fmt.Sprintf("%dx%d/interpreter", side, side), func(b *testing.B) {
			it, err := graph.NewInterpreter(g, w, 2)
			if err != nil {
				b.Fatal(err)
			}
			ids := make([]int, n)
			b.ResetTimer()
			for range b.N {
				if _, _, err := it.RunInput(it.NewPassState(n), graph.Input{IDs: ids, Rows: rows, Positions: pos}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

var (
	clipMeanBench = [3]float32{0.48145466, 0.4578275, 0.40821073}
	clipStdBench  = [3]float32{0.26862954, 0.26130258, 0.27577711}
)

// randomQwenVision returns random weights of g: N(0, 1/fan_in) matrices,
// unit norm gains, small biases.
func randomQwenVision(g *graph.Graph) graph.Weights {
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
