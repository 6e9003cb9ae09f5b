package gguf

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
)

const stories = "models/stories260K/stories260K.gguf"

func openT(t *testing.T, path string) *File {
	t.Helper()
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestStories260K(t *testing.T) {
	f := openT(t, testutil.Path(t, stories))
	if f.Format() != "gguf" || f.Version() != 3 || f.Alignment() != 32 {
		t.Errorf("format %q version %d alignment %d, want gguf 3 32", f.Format(), f.Version(), f.Alignment())
	}
	m := f.Metadata()
	if s, _ := format.MetaString(m, "general.architecture"); s != "llama" {
		t.Errorf("general.architecture = %q, want llama", s)
	}
	if n, ok := format.MetaInt(m, "llama.embedding_length"); !ok || n != 64 {
		t.Errorf("llama.embedding_length = %d, %v; want 64", n, ok)
	}
	tensors := f.Tensors()
	if len(tensors) != 48 {
		t.Fatalf("%d tensors, want 48", len(tensors))
	}
	for _, ti := range tensors {
		if ti.DType != tensor.F32 {
			t.Errorf("%s: dtype %v, want f32", ti.Name, ti.DType)
		}
		if typ, _ := f.TensorType(ti.Name); typ != TypeF32 {
			t.Errorf("%s: ggml type %v, want F32", ti.Name, typ)
		}
	}
	emb, ok := format.Find(f, "token_embd.weight")
	if !ok || !slices.Equal(emb.Shape, []int64{512, 64}) {
		t.Fatalf("token_embd.weight shape %v (found %v), want [512 64]", emb.Shape, ok)
	}
	e, err := f.ReadFloat32("token_embd.weight")
	if err != nil {
		t.Fatal(err)
	}
	o, err := f.ReadFloat32("output.weight")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e, o) {
		t.Error("output.weight differs from token_embd.weight")
	}
	toks, err := format.MetaStrings(m, "tokenizer.ggml.tokens")
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 512 || toks[1] != "<s>" {
		t.Errorf("%d tokens, tokens[1] = %q; want 512 and <s>", len(toks), toks[1])
	}

	// Outside references: the llama2.c files of the same model (PROVENANCE):
	// its token embedding table is bit-identical, and tok512.bin holds the
	// same 512 scores.
	bin := testutil.ReadFile(t, "llama2c/stories260K.bin")
	dim := int(binary.LittleEndian.Uint32(bin[0:]))
	vocab := int(int32(binary.LittleEndian.Uint32(bin[20:])))
	vocab = max(vocab, -vocab) // negative vocab_size marks unshared classifier weights
	if dim != 64 || vocab != 512 {
		t.Fatalf("llama2c header dim %d vocab %d", dim, vocab)
	}
	for i := range dim * vocab {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(bin[28+4*i:])); got != e[i] {
			t.Fatalf("token_embd.weight[%d] = %v, llama2c table has %v", i, e[i], got)
		}
	}
	tok := testutil.ReadFile(t, "llama2c/tok512-dratman/tok512.bin")
	scores := m["tokenizer.ggml.scores"].([]float32)
	pos := 4 // max_token_length
	for i := range 512 {
		want := math.Float32frombits(binary.LittleEndian.Uint32(tok[pos:]))
		n := int(binary.LittleEndian.Uint32(tok[pos+4:]))
		pos += 8 + n
		if scores[i] != want {
			t.Fatalf("score[%d] = %v, tok512.bin has %v", i, scores[i], want)
		}
	}
}

// TestOpenPaths checks that the mapped path (Open) and the reader path
// (OpenReader) agree on every tensor.
func TestOpenPaths(t *testing.T) {
	path := testutil.Path(t, stories)
	f := openT(t, path)
	osf, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer osf.Close()
	st, _ := osf.Stat()
	g, err := OpenReader(osf, st.Size(), path)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range f.Tensors() {
		a, err1 := f.TensorData(ti.Name)
		b, err2 := g.TensorData(ti.Name)
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Fatalf("%s: mapped and read data differ (%v, %v)", ti.Name, err1, err2)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.TensorData("output.weight"); err != ErrClosed {
		t.Errorf("TensorData after Close: %v, want ErrClosed", err)
	}
}

// safetensorsF32 reads one F32 tensor of a safetensors file: shape and values.
func safetensorsF32(t *testing.T, b []byte, name string) ([]int64, []float32) {
	t.Helper()
	n := binary.LittleEndian.Uint64(b)
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &hdr); err != nil {
		t.Fatal(err)
	}
	var e struct {
		DType   string   `json:"dtype"`
		Shape   []int64  `json:"shape"`
		Offsets [2]int64 `json:"data_offsets"`
	}
	if err := json.Unmarshal(hdr[name], &e); err != nil || e.DType != "F32" {
		t.Fatalf("safetensors %s: %v dtype %q", name, err, e.DType)
	}
	data := b[8+int64(n)+e.Offsets[0] : 8+int64(n)+e.Offsets[1]]
	out := make([]float32, len(data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return e.Shape, out
}

// TestArchModels opens every per-family fixture, reads every tensor, and
// checks header values and the token embedding against the HF config and
// safetensors files the GGUF was converted from.
func TestArchModels(t *testing.T) {
	for _, fam := range []string{"llama", "qwen2", "qwen3", "gemma", "gemma3", "phi3", "granite", "smollm3", "glm"} {
		t.Run(fam, func(t *testing.T) {
			f := openT(t, testutil.Path(t, "arch/"+fam+"/model.gguf"))
			var cfg struct {
				Hidden int64 `json:"hidden_size"`
				Layers int64 `json:"num_hidden_layers"`
				Vocab  int64 `json:"vocab_size"`
			}
			if err := json.Unmarshal(testutil.ReadFile(t, "arch/"+fam+"/config.json"), &cfg); err != nil {
				t.Fatal(err)
			}
			m := f.Metadata()
			arch, _ := format.MetaString(m, "general.architecture")
			if n, _ := format.MetaInt(m, arch+".embedding_length"); n != cfg.Hidden {
				t.Errorf("%s.embedding_length = %d, config hidden_size %d", arch, n, cfg.Hidden)
			}
			if n, _ := format.MetaInt(m, arch+".block_count"); n != cfg.Layers {
				t.Errorf("%s.block_count = %d, config num_hidden_layers %d", arch, n, cfg.Layers)
			}
			for _, ti := range f.Tensors() {
				v, err := f.ReadFloat32(ti.Name)
				if err != nil {
					t.Fatal(err)
				}
				if int64(len(v)) != ti.NumElements() || ti.Size != 4*ti.NumElements() {
					t.Errorf("%s: %d values, size %d, shape %v", ti.Name, len(v), ti.Size, ti.Shape)
				}
				for i, x := range v {
					if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
						t.Fatalf("%s[%d] = %v", ti.Name, i, x)
					}
				}
			}
			emb, _ := format.Find(f, "token_embd.weight")
			got, err := f.ReadFloat32("token_embd.weight")
			if err != nil {
				t.Fatal(err)
			}
			shape, want := safetensorsF32(t, testutil.ReadFile(t, "arch/"+fam+"/model.safetensors"), "model.embed_tokens.weight")
			if !slices.Equal(emb.Shape, shape) || !slices.Equal(emb.Shape, []int64{cfg.Vocab, cfg.Hidden}) {
				t.Errorf("token_embd.weight shape %v, safetensors %v, config [%d %d]", emb.Shape, shape, cfg.Vocab, cfg.Hidden)
			}
			if !slices.Equal(got, want) {
				t.Error("token_embd.weight values differ from model.embed_tokens.weight")
			}
		})
	}
}

// TestVocabFixtures opens the vocab-only files and compares their tokens and
// merges with the tokenizer files they were built from.
func TestVocabFixtures(t *testing.T) {
	for _, c := range []struct{ file, pre, vocab, merges string }{
		{"rebuilt-vocab-qwen2.gguf", "qwen2", "tokenizers/qwen2.5/vocab.json", "tokenizers/qwen2.5/merges.txt"},
		{"rebuilt-vocab-llama-bpe.gguf", "llama-bpe", "tokenizers/llama3.2/encoder.json", "tokenizers/llama3.2/vocab.bpe"},
	} {
		t.Run(c.pre, func(t *testing.T) {
			f := openT(t, testutil.Path(t, "tokenizer-fixtures/"+c.file))
			m := f.Metadata()
			if s, _ := format.MetaString(m, "tokenizer.ggml.model"); s != "gpt2" {
				t.Errorf("tokenizer.ggml.model = %q, want gpt2", s)
			}
			if s, _ := format.MetaString(m, "tokenizer.ggml.pre"); s != c.pre {
				t.Errorf("tokenizer.ggml.pre = %q, want %q", s, c.pre)
			}
			if len(f.Tensors()) != 0 {
				t.Errorf("%d tensors in a vocab-only file", len(f.Tensors()))
			}
			merges, err := format.MetaStrings(m, "tokenizer.ggml.merges")
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			sc := bufio.NewScanner(bytes.NewReader(testutil.ReadFile(t, c.merges)))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				if l := sc.Text(); l != "" && !strings.HasPrefix(l, "#version") {
					want = append(want, l)
				}
			}
			if !slices.Equal(merges, want) {
				t.Errorf("%d merges, %s has %d (or they differ)", len(merges), c.merges, len(want))
			}
			toks, err := format.MetaStrings(m, "tokenizer.ggml.tokens")
			if err != nil {
				t.Fatal(err)
			}
			var vocab map[string]int
			if err := json.Unmarshal(testutil.ReadFile(t, c.vocab), &vocab); err != nil {
				t.Fatal(err)
			}
			if len(toks) < len(vocab) {
				t.Fatalf("%d tokens, %s has %d", len(toks), c.vocab, len(vocab))
			}
			for s, id := range vocab {
				if toks[id] != s {
					t.Fatalf("tokens[%d] = %q, %s has %q", id, toks[id], c.vocab, s)
				}
			}
		})
	}
}
