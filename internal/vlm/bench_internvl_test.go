package vlm

import (
	"encoding/json"
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

// BenchmarkEncodeInternVL encodes one tile (the class token and the patch
// rows to mlp1's output) with the compiled vision plan (f32 and w8
// weights) and with the graph interpreter, on 2 threads, at InternVL3-1B's
// encoder width (InternViT-300M: 448x448 tiles of 14-pixel patches, 1025
// rows, hidden 1024, 16 heads, FFN 4096; pixel shuffle 2, 256 tokens of
// text width 896) but 2 of its 24 blocks (random weights; a block's time
// is the same at any depth). Run with -benchtime=1x. Figures:
// docs/architectures.md.
func BenchmarkEncodeInternVL(b *testing.B) {
	dir := testutil.Path(b, internvlDir)
	ck, err := detect.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	text, err := arch.Load(ck)
	ck.Close()
	if err != nil {
		b.Fatal(err)
	}
	vc := arch.InternVLVision{ImageSize: 448, PatchSize: 14, Channels: 3, Hidden: 1024, FFN: 4096, Layers: 2, Heads: 16,
		NormEps: 1e-6, ProjNormEps: 1e-5, ScaleFactor: 2, TextHidden: 896, Mean: [3]float32{0.485, 0.456, 0.406},
		Std: [3]float32{0.229, 0.224, 0.225}, MinTiles: 1, MaxTiles: 12, Thumbnail: true, ImageTokenID: -1}
	g, err := arch.BuildInternVLVision(&vc)
	if err != nil {
		b.Fatal(err)
	}
	w := randomQwenVision(g)
	r := rand.New(rand.NewPCG(1, 2))
	pix := make([]float32, 3*448*448)
	for i := range pix {
		pix[i] = float32(r.Float64()*2 - 1)
	}
	rows, ids, err := vc.Rows(pix)
	if err != nil {
		b.Fatal(err)
	}
	for _, vw := range []string{"f32", "w8"} {
		b.Run("compiled-"+vw, func(b *testing.B) {
			cfg, _ := json.Marshal(vc)
			path := filepath.Join(b.TempDir(), "v.aot")
			tg, err := arch.Build(&text.Config, arch.BuildOptions{})
			if err != nil {
				b.Fatal(err)
			}
			in := compile.Input{Graph: tg, Weights: text.Weights, Ctx: 64, Manifest: textManifest(text),
				Vision: &compile.VisionInput{Graph: g, Weights: w, Family: arch.InternVLVisionFamily, Config: cfg, Weights8: vw == "w8",
					Sizes: []compile.VisionSize{{Height: 448, Width: 448, Rows: len(ids)}}}}
			if err := compile.Compile(in, path); err != nil {
				b.Fatal(err)
			}
			e, err := engine.OpenWith(path, engine.Options{Threads: 2})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			enc, err := e.NewEncoder(plan.VisionPlanName(448, 448), 2)
			if err != nil {
				b.Fatal(err)
			}
			defer enc.Close()
			b.ResetTimer()
			for range b.N {
				if _, err := enc.Encode(rows, ids); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("interpreter", func(b *testing.B) {
		it, err := graph.NewInterpreter(g, w, 2)
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			if _, _, err := it.RunInput(it.NewPassState(len(ids)), graph.Input{IDs: ids, Rows: rows}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
