package vlm

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/vision"
)

// TestCompiledTextAfterImage: the SmolVLM text model compiled to an
// artifact, fed the fixture's whole sequence (image rows as embedding
// rows through ImageSequence, in passes of 8 so an image spans passes),
// gives llama.cpp's logits after the last prompt token and its 8 greedy
// ids; with aotlm's own image embeddings and with llama.cpp's.
func TestCompiledTextAfterImage(t *testing.T) {
	dir := testutil.Path(t, "vlm/smolvlm")
	ref := loadRef(t)
	ck, err := detect.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := arch.Load(ck)
	ck.Close()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "smolvlm.aot")
	if err := compile.CompileModel(tm, compile.Source{}, compile.Options{ARLens: []int{8}, Ctx: 128, KV: "f32"}, path); err != nil {
		t.Fatal(err)
	}
	e, err := engine.OpenWith(path, engine.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	m, err := Open(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	vc := m.VLM.Vision
	D, V := m.TextConfig().Hidden, m.TextConfig().Vocab
	for _, c := range ref.Cases {
		img, err := vision.DecodeFile(filepath.Join(dir, c.Image), vision.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		own, err := m.Encode(img)
		if err != nil {
			t.Fatal(err)
		}
		var theirs []float32
		for _, l := range c.Layout {
			if l.Type == "image" {
				theirs = append(theirs, l.Embeddings...)
			}
		}
		var ids []int
		for _, l := range c.Layout {
			if l.Type == "text" {
				ids = append(ids, l.IDs...)
			} else {
				for range l.NTokens {
					ids = append(ids, vc.ImageTokenID)
				}
			}
		}
		for _, src := range []struct {
			name string
			rows []float32
			tol  float64
		}{{"own embeddings", append(append([]float32(nil), own.Slices[0]...), own.Overview...), logitTol},
			{"llama.cpp embeddings", theirs, refLogitTol}} {
			s, err := e.NewSession(engine.SessionOptions{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			q := NewImageSequence(s, vc.ImageTokenID, D)
			if err := q.Queue(src.rows); err != nil {
				t.Fatal(err)
			}
			logits, err := q.PrefillContext(context.Background(), ids)
			if err != nil {
				t.Fatal(err)
			}
			if q.Pending() != 0 {
				t.Fatalf("%d image rows left unplaced", q.Pending())
			}
			d := maxDiff(logits[:V], c.Logits[len(c.Logits)-1])
			t.Logf("%s %s: last-position logits differ by %.3g", c.Image, src.name, d)
			if d > src.tol {
				t.Errorf("%s %s: logits differ by %.3g > %g", c.Image, src.name, d, src.tol)
			}
			for k, want := range c.Greedy {
				best := 0
				for j, v := range logits[:V] {
					if v > logits[best] {
						best = j
					}
				}
				if best != want {
					t.Fatalf("%s %s: greedy[%d] = %d, want %d", c.Image, src.name, k, best, want)
				}
				if logits, err = q.Decode(best); err != nil {
					t.Fatal(err)
				}
			}
			q.Close()
		}
	}
}

// TestEncoderLowering: the vision graph lowers only as a vision plan
// (rows input, bidirectional attention without cache, group_rows); the
// text lowering refuses it clearly rather than lowering it wrongly.
func TestEncoderLowering(t *testing.T) {
	m, err := Open(testutil.Path(t, "vlm/smolvlm"), 1)
	if err != nil {
		t.Fatal(err)
	}
	vc := &m.VLM.Vision
	g, err := arch.BuildVision(vc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := compile.Lower(g, 64, 64); err == nil || !strings.Contains(err.Error(), "vision plan of its own") {
		t.Fatalf("lowering the vision graph as a text plan: %v", err)
	}
	p, err := compile.LowerVision(g, vc.Grid()*vc.Grid())
	if err != nil {
		t.Fatal(err)
	}
	if p.KV.Layers != 0 || p.Buffers[p.Output].Rows != vc.TokensPerImage() || p.Buffers[p.Output].Cols != vc.TextHidden {
		t.Fatalf("vision plan: %d cache layers, output %+v", p.KV.Layers, p.Buffers[p.Output])
	}
	tg, err := arch.Build(&m.VLM.Text.Config, arch.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := compile.LowerVision(tg, 16); err == nil || !strings.Contains(err.Error(), "bidirectional") {
		t.Fatalf("lowering a text graph as a vision plan: %v", err)
	}
}
