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
