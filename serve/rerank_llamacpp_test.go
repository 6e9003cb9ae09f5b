package serve

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
)

// rankYes and rankNo are the ids the reranker fixture answers with.
const rankYes, rankNo = 200, 201

// writeRankGGUF writes the qwen3 fixture of arch/ as a reranker in the
// layout llama.cpp's converter gives Qwen3-Reranker: pooling_type 4
// (rank), the classifier labels yes and no, and cls.output.weight
// holding the classifier's rows of the two answer ids (yes first), the
// rest of the file as it is (without output.weight unless keepOutput).
func writeRankGGUF(t testing.TB, path string, keepOutput bool) {
	t.Helper()
	f, err := gguf.Open(testutil.Path(t, "arch/qwen3/model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kv := append(f.KVs(), gguf.KV{Key: "qwen3.pooling_type", Value: uint32(4)},
		gguf.KV{Key: "qwen3.classifier.output_labels", Value: []any{"yes", "no"}})
	var tensors []gguf.WriteTensor
	for _, ti := range f.Tensors() {
		if ti.Name == "output.weight" && !keepOutput {
			continue
		}
		data, err := f.TensorData(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, gguf.WriteTensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: slices.Clone(data)})
	}
	out, err := f.ReadFloat32("output.weight")
	if err != nil {
		t.Fatal(err)
	}
	d := len(out) / 352
	cls := append(slices.Clone(out[rankYes*d:(rankYes+1)*d]), out[rankNo*d:(rankNo+1)*d]...)
	tensors = append(tensors, gguf.WriteTensor{Name: "cls.output.weight", DType: tensor.F32, Shape: []int64{2, int64(d)}, Values: cls})
	w, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := gguf.Write(w, kv, tensors); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestWriteRankGGUF writes the reranker fixture where AOTLM_RANK_GGUF
// says (how testdata/rerank_llamacpp.json was made); without it, it
// only checks that the file is written. The same file without its
// classifier (output.weight) does not compile: its scores would come from
// the tied embeddings.
func TestWriteRankGGUF(t *testing.T) {
	path := os.Getenv("AOTLM_RANK_GGUF")
	if path == "" {
		path = filepath.Join(t.TempDir(), "rank.gguf")
	}
	writeRankGGUF(t, path, true)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if v, ok := f.Value("qwen3.pooling_type"); !ok || v != uint32(4) {
		t.Fatalf("pooling_type %v", v)
	}
	bare := filepath.Join(t.TempDir(), "bare.gguf")
	writeRankGGUF(t, bare, false)
	err = compile.CompileFile(bare, filepath.Join(t.TempDir(), "bare.aot"), compile.Options{Ctx: 32})
	if err == nil || !strings.Contains(err.Error(), "cls.output.weight") {
		t.Fatalf("a reranker GGUF without output.weight: %v", err)
	}
}

// TestRerankAgainstLlamaCpp: the reranker fixture (writeRankGGUF)
// compiles as a reranker from its pooling_type, and the server's scores
// of eight documents (id sequences sharing a head of ten ids, as a query
// is shared) are llama.cpp's rank scores of the same GGUF within 1e-3,
// in the same order. testdata/rerank_llamacpp.json was made with
// llama.cpp's libllama on the CPU: the file written by TestWriteRankGGUF,
// a context with embeddings on, pooling_type 4, an F32 KV cache and flash
// attention off, each document decoded in one batch, the score the first
// of llama_get_embeddings_seq's two values (the softmax of the
// classifier's yes and no rows at the last position).
func TestRerankAgainstLlamaCpp(t *testing.T) {
	var ref struct {
		Yes, No   int
		Documents []struct {
			IDs   []int   `json:"ids"`
			Score float64 `json:"score"`
		} `json:"documents"`
	}
	b, err := os.ReadFile(filepath.Join("testdata", "rerank_llamacpp.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ref); err != nil || ref.Yes != rankYes || ref.No != rankNo || len(ref.Documents) < 2 {
		t.Fatalf("rerank_llamacpp.json: %v (yes %d, no %d, %d documents)", err, ref.Yes, ref.No, len(ref.Documents))
	}
	dir := t.TempDir()
	src, art := filepath.Join(dir, "rank.gguf"), filepath.Join(dir, "rank.aot")
	writeRankGGUF(t, src, true)
	if err := compile.CompileFile(src, art, compile.Options{ARLens: []int{8}, Ctx: 64}); err != nil {
		t.Fatal(err)
	}
	m, err := aotlm.Open(art, aotlm.Options{Threads: 1, IDsOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Pooling() != aotlm.PoolRank {
		t.Fatalf("pooling %q, want rank from the GGUF's pooling_type", m.Pooling())
	}
	srv, err := New(m, Options{ModelID: "rank"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	sl, e := srv.acquire(context.Background(), nil, "")
	if e != nil {
		t.Fatal(e.Message)
	}
	defer srv.pool.release(sl)
	got := make([]float64, len(ref.Documents))
	worst := 0.0
	for i, d := range ref.Documents {
		if got[i], err = srv.rankScore(context.Background(), sl, d.IDs, rankYes, rankNo); err != nil {
			t.Fatal(err)
		}
		worst = max(worst, math.Abs(got[i]-d.Score))
		if math.Abs(got[i]-d.Score) > 1e-3 {
			t.Errorf("document %d: score %.6f, llama.cpp's %.6f", i, got[i], d.Score)
		}
	}
	order := func(score func(i int) float64) []int {
		idx := make([]int, len(ref.Documents))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return score(idx[a]) > score(idx[b]) })
		return idx
	}
	ours, theirs := order(func(i int) float64 { return got[i] }), order(func(i int) float64 { return ref.Documents[i].Score })
	if !slices.Equal(ours, theirs) {
		t.Fatalf("order %v, llama.cpp's %v", ours, theirs)
	}
	if srv.metrics.reused.Load() == 0 {
		t.Error("the documents' shared head was prefilled again for each")
	}
	t.Logf("largest score difference %.2g; order %v", worst, ours)
}
