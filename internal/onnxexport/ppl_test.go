package onnxexport

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/eval"
)

// recorder is an eval.Session that records the token sequences a scoring
// rule runs (one per Reset) and returns zero logits.
type recorder struct {
	vocab int
	seqs  [][]int
}

func (r *recorder) Reset() { r.seqs = append(r.seqs, nil) }

func (r *recorder) Logits(ids []int) ([][]float32, error) {
	if len(r.seqs) == 0 {
		r.Reset()
	}
	r.seqs[len(r.seqs)-1] = append(r.seqs[len(r.seqs)-1], ids...)
	out := make([][]float32, len(ids))
	for i := range out {
		out[i] = make([]float32, r.vocab)
	}
	return out, nil
}

// replay is an eval.Session that returns logits computed beforehand for
// the sequences a recorder saw, in the same order.
type replay struct {
	vocab  int
	seqs   [][]int
	logits []float32 // every row of every sequence
	seq    int       // current sequence, -1 before the first Reset
	row    int       // rows of the current sequence returned
	offset int       // rows of the sequences before it
}

func (r *replay) Reset() {
	if r.seq >= 0 {
		r.offset += len(r.seqs[r.seq])
	}
	r.seq++
	r.row = 0
}

func (r *replay) Logits(ids []int) ([][]float32, error) {
	if r.seq < 0 {
		r.Reset()
	}
	if r.seq >= len(r.seqs) || r.row+len(ids) > len(r.seqs[r.seq]) {
		return nil, errors.New("replay: more tokens than were recorded")
	}
	out := make([][]float32, len(ids))
	for i, id := range ids {
		if r.seqs[r.seq][r.row+i] != id {
			return nil, fmt.Errorf("replay: token %d of sequence %d is %d, recorded %d", r.row+i, r.seq, id, r.seqs[r.seq][r.row+i])
		}
		k := (r.offset + r.row + i) * r.vocab
		out[i] = r.logits[k : k+r.vocab]
	}
	r.row += len(ids)
	return out, nil
}

// ortPerplexity scores tokens with the export in dir through eval's rule:
// the sequences the rule runs are recorded, run by ONNX Runtime in one
// process, and replayed.
func ortPerplexity(t *testing.T, dir string, tokens []int, vocab int, opts eval.Options) eval.Result {
	t.Helper()
	script := ortDir(t)
	rec := &recorder{vocab: vocab}
	if _, err := eval.Perplexity(rec, tokens, opts); err != nil {
		t.Fatal(err)
	}
	job := filepath.Join(t.TempDir(), "job.json")
	out := filepath.Join(t.TempDir(), "logits.f32")
	b, _ := json.Marshal(map[string]any{"dir": dir, "sequences": rec.seqs})
	if err := os.WriteFile(job, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join(script, "run.mjs"), job, out)
	cmd.Dir = script
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ONNX Runtime: %v\n%s", err, msg)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	logits := make([]float32, len(raw)/4)
	for i := range logits {
		logits[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	rows := 0
	for _, s := range rec.seqs {
		rows += len(s)
	}
	if len(logits) != rows*vocab {
		t.Fatalf("ONNX Runtime wrote %d logits, want %d rows of %d", len(logits), rows, vocab)
	}
	res, err := eval.Perplexity(&replay{vocab: vocab, seqs: rec.seqs, logits: logits, seq: -1}, tokens, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
