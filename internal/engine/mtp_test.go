package engine_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil"
)

// qwen35MTPRef is the fixture's MTP part: llama.cpp's draft logits of the
// last rows and the argmax of every row (row j: token j+1 and the
// target's hidden state at j, at position j+1).
type qwen35MTPRef struct {
	Tokens []int `json:"tokens"`
	MTP    struct {
		Argmax   []int       `json:"mtp_argmax_all_rows"`
		From     int         `json:"mtp_logits_rows_from"`
		LastRows [][]float32 `json:"mtp_logits_last_rows"`
	} `json:"mtp"`
}

// compileFile compiles the checkpoint at src (with its draft head when it
// has one) and opens the artifact.
func compileFile(t testing.TB, src string, ctx int, arLens ...int) *engine.Engine {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.aot")
	if err := compile.CompileFile(src, path, compile.Options{ARLens: arLens, Ctx: ctx}); err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// TestQwen35MTPArtifact compiles the qwen35 fixture's HF folder and GGUF
// with the draft head and runs it as llama.cpp's MTP context does: the
// target's hidden rows (Session.Hidden) of every position from a prefill
// in passes of 8, then the head over (token j+1, hidden j) at rotary
// position j+1, in passes of 8 rows (hybrid) and of one row (kv). Its
// logits must equal llama.cpp's within 1e-3 on the reference rows and
// its argmax agree on every row.
func TestQwen35MTPArtifact(t *testing.T) {
	var ref qwen35MTPRef
	if err := json.Unmarshal(testutil.ReadFile(t, "arch/qwen35/reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	n := len(ref.Tokens)
	for _, src := range []string{"arch/qwen35", "arch/qwen35/model.gguf"} {
		e := compileFile(t, testutil.Path(t, src), 96, 8)
		head := e.MTP()
		if head == nil {
			t.Fatalf("%s: the artifact has no draft head", src)
		}
		D := e.HiddenWidth()
		s := newSession(t, e, engine.SessionOptions{Threads: 2})
		hidden := make([]float32, 0, n*D)
		for lo := 0; lo < n; lo += 8 {
			ids := ref.Tokens[lo:min(lo+8, n)]
			if _, err := s.Run(&engine.Pass{IDs: ids, Logits: []int{}}); err != nil {
				t.Fatal(err)
			}
			for j := lo; j < lo+len(ids); j++ {
				h := s.Hidden(j)
				if len(h) != D {
					t.Fatalf("%s: hidden row %d has %d values, want %d", src, j, len(h), D)
				}
				hidden = append(hidden, h...)
			}
			if err := s.Commit(seq(len(ids))); err != nil {
				t.Fatal(err)
			}
		}
		if s.Hidden(n) != nil || s.Hidden(n-9) != nil {
			t.Errorf("%s: Hidden gives a row the last pass did not compute", src)
		}
		for _, ar := range []int{8, 1} {
			m := newSession(t, head, engine.SessionOptions{Threads: 2})
			P := m.PosComponents()
			var d float64
			agree := 0
			for lo := 0; lo < n-1; lo += ar {
				hi := min(lo+ar, n-1)
				pos := make([]int, 0, (hi-lo)*P)
				for j := lo; j < hi; j++ {
					for range P {
						pos = append(pos, j+1)
					}
				}
				out, err := m.Run(&engine.Pass{IDs: ref.Tokens[lo+1 : hi+1], Rows: hidden[lo*D : hi*D],
					Positions: pos, Logits: seq(hi - lo)})
				if err != nil {
					t.Fatal(err)
				}
				for j := lo; j < hi; j++ {
					row := out.Row(j - lo)
					if argmax(row) == ref.MTP.Argmax[j] {
						agree++
					}
					if k := j - ref.MTP.From; k >= 0 && k < len(ref.MTP.LastRows) {
						d = max(d, maxDiff(row, ref.MTP.LastRows[k]))
					}
				}
				if len(m.Hidden(hi-1)) != D {
					t.Fatalf("%s: the head keeps no hidden row for its last row", src)
				}
				if err := m.Commit(seq(hi - lo)); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("%s ar%d: draft logits max |diff| %.3g vs llama.cpp, argmax %d/%d", src, ar, d, agree, n-1)
			if d > 1e-3 {
				t.Errorf("%s ar%d: draft logits differ from llama.cpp by %.3g (tolerance 1e-3)", src, ar, d)
			}
			if agree != n-1 {
				t.Errorf("%s ar%d: draft argmax agrees on %d of %d rows", src, ar, agree, n-1)
			}
		}
	}
}

// seq returns 0, 1, ..., n-1.
func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestMTPPassRefuses checks the head's and the model's passes refuse
// input rows that do not fit, by name, and that a model without a head
// has none.
func TestMTPPassRefuses(t *testing.T) {
	e := compileFile(t, testutil.Path(t, "arch/qwen35/model.gguf"), 32, 4)
	head := e.MTP()
	m := newSession(t, head, engine.SessionOptions{})
	if _, err := m.Decode(5); err == nil || !strings.Contains(err.Error(), "input rows") {
		t.Errorf("Decode on the head: %v", err)
	}
	if _, err := m.Prefill([]int{5, 6}); err == nil || !strings.Contains(err.Error(), "input rows") {
		t.Errorf("Prefill on the head: %v", err)
	}
	D := e.HiddenWidth()
	if _, err := m.Run(&engine.Pass{IDs: []int{5, 6}, Rows: make([]float32, D)}); err == nil || !strings.Contains(err.Error(), "input values") {
		t.Errorf("one row of input for two: %v", err)
	}
	s := newSession(t, e, engine.SessionOptions{})
	if _, err := s.Run(&engine.Pass{IDs: []int{5}, Rows: make([]float32, D)}); err == nil || !strings.Contains(err.Error(), "reads none") {
		t.Errorf("input rows to the model: %v", err)
	}
	if s.Hidden(0) != nil {
		t.Error("a hidden row before any pass")
	}
	if _, err := s.Decode(5); err != nil {
		t.Fatal(err)
	}
	if len(s.Hidden(0)) != D || s.Hidden(1) != nil {
		t.Errorf("after one decode: hidden rows of %d and %d values", len(s.Hidden(0)), len(s.Hidden(1)))
	}
	if err := s.Rewind(0); err != nil {
		t.Fatal(err)
	}
	if s.Hidden(0) != nil {
		t.Error("a hidden row of a position rewound")
	}
	plain := compileModel(t, storiesModel(t), 32, 4)
	if plain.MTP() != nil || plain.HiddenWidth() != 0 {
		t.Error("stories260K's artifact has a draft head or hidden rows")
	}
	ps := newSession(t, plain, engine.SessionOptions{})
	if _, err := ps.Decode(5); err != nil {
		t.Fatal(err)
	}
	if ps.Hidden(0) != nil {
		t.Error("a model without a head gives hidden rows")
	}
	if _, err := ps.NewDraftHead(); err == nil {
		t.Error("a draft head session on a model without a head")
	}
}
