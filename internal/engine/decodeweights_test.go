package engine_test

import (
	"testing"

	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil/tinymodel"
)

// TestDecodeWeights: a decode step streams every tensor of the artifact
// once, but an untied model's embedding table (of which it reads one row
// per token): the views of a tied tiny Llama add up to every tensor's
// bytes, an untied one's to every tensor's but one embedding-sized table.
func TestDecodeWeights(t *testing.T) {
	for _, tied := range []bool{true, false} {
		dir := t.TempDir()
		cfg := tinymodel.Default()
		cfg.TieWordEmbeddings = tied
		if err := tinymodel.WriteLlama(dir, cfg, 3); err != nil {
			t.Fatal(err)
		}
		e, path := compilePath(t, dir, compile.Options{ARLens: []int{1, 4}, Ctx: 32})
		parts, err := e.DecodeWeights()
		if err != nil {
			t.Fatal(err)
		}
		var got int64
		for _, p := range parts {
			got += int64(len(p))
		}
		a, err := artifact.Open(path, artifact.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var all, table int64
		for _, ti := range a.Tensors() {
			_, data, err := a.Tensor(ti.Name)
			if err != nil {
				t.Fatal(err)
			}
			all += int64(len(data))
			if len(ti.Shape) == 2 && ti.Shape[0] == int64(cfg.VocabSize) && ti.Shape[1] == int64(cfg.HiddenSize) {
				table = max(table, int64(len(data)))
			}
		}
		a.Close()
		want := all
		if !tied {
			want -= table
		}
		if table == 0 || got != want {
			t.Errorf("tied %v: decode streams %d bytes in %d tensors, want %d (all %d, an embedding table %d)", tied, got, len(parts), want, all, table)
		}
	}
}

// TestDecodeKVBytes: a decode step of a tiny Llama at depth d reads the
// keys and values of d+1 positions of every layer: layers x (d+1) x
// key/value heads x head size x 2, at 4, 2 and 1 bytes an element for
// float32, binary16 and uint8 caches; nothing at a negative depth.
func TestDecodeKVBytes(t *testing.T) {
	dir := t.TempDir()
	cfg := tinymodel.Default()
	if err := tinymodel.WriteLlama(dir, cfg, 3); err != nil {
		t.Fatal(err)
	}
	hd := cfg.HiddenSize / cfg.NumHeads
	for _, kv := range []struct {
		name string
		elem int64
	}{{"f32", 4}, {"f16", 2}, {"u8", 1}} {
		e, _ := compilePath(t, dir, compile.Options{ARLens: []int{1, 4}, Ctx: 32, KV: kv.name})
		for _, d := range []int{0, 7, 31} {
			want := int64(cfg.NumLayers*(d+1)*cfg.NumKVHeads*hd*2) * kv.elem
			if got := e.DecodeKVBytes(d); got != want {
				t.Errorf("%s cache, depth %d: %d bytes, want %d", kv.name, d, got, want)
			}
		}
		if got := e.DecodeKVBytes(-1); got != 0 {
			t.Errorf("%s cache, depth -1: %d bytes, want 0", kv.name, got)
		}
	}
}
