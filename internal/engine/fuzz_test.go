package engine_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/testutil"
)

// memArtifact is an artifact's manifest, blobs and tensors held in memory.
type memArtifact struct {
	manifest plan.Manifest
	blobs    map[string][]byte
	infos    map[string]artifact.TensorInfo
	data     map[string][]byte
}

func (m *memArtifact) blob(name string) ([]byte, error) {
	if b, ok := m.blobs[name]; ok {
		return b, nil
	}
	return nil, fmt.Errorf("blob %q: %w", name, artifact.ErrNotFound)
}

func (m *memArtifact) tensor(name string) (artifact.TensorInfo, []byte, error) {
	if ti, ok := m.infos[name]; ok {
		return ti, m.data[name], nil
	}
	return artifact.TensorInfo{}, nil, fmt.Errorf("tensor %q: %w", name, artifact.ErrNotFound)
}

// storiesInMemory compiles stories260K (AR 1 and 4, context 32) and reads
// the artifact back into memory.
func storiesInMemory(t testing.TB) *memArtifact {
	ck, err := detect.Open(testutil.Path(t, "models/stories260K/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := arch.Load(ck)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "stories.aot")
	if err := compile.CompileModel(m, compile.Source{}, compile.Options{ARLens: []int{4}, Ctx: 32}, path); err != nil {
		t.Fatal(err)
	}
	a, err := artifact.Open(path, artifact.OpenOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	mem := &memArtifact{blobs: map[string][]byte{}, infos: map[string]artifact.TensorInfo{}, data: map[string][]byte{}}
	if err := a.Manifest(&mem.manifest); err != nil {
		t.Fatal(err)
	}
	for _, s := range a.Blobs() {
		b, _ := a.Blob(s.Name)
		mem.blobs[s.Name] = append([]byte(nil), b...)
	}
	for _, ti := range a.Tensors() {
		_, b, err := a.Tensor(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		mem.infos[ti.Name], mem.data[ti.Name] = ti, append([]byte(nil), b...)
	}
	return mem
}

// FuzzPlanBlob replaces the AR-1 plan of a compiled stories260K with the
// fuzzed bytes and, when the engine accepts it, runs a prefill and a
// decode: a plan that passes validation must never make the engine panic
// or index out of bounds.
func FuzzPlanBlob(f *testing.F) {
	mem := storiesInMemory(f)
	f.Add(mem.blobs["plan/ar1"])
	f.Add(mem.blobs["plan/ar4"])
	f.Add([]byte(`{"version":1,"rows":1,"arena":576,"buffers":[{"rows":1,"cols":64,"offset":0},{"rows":1,"cols":512,"offset":64}],` +
		`"steps":[{"op":"embed","out":0,"weights":["model.embed_tokens.weight"]},{"op":"linear","in":[0],"out":1,"weights":["lm_head.weight"]}],` +
		`"output":1,"kv":{"layers":0,"cols":0,"ctx":32}}`))
	f.Add([]byte(`{"version":1,"rows":1,"arena":2147483647,"buffers":[{"rows":1,"cols":16777216,"offset":2130706431}]}`))
	f.Add([]byte(`{"version":1,"steps":[{"op":"attention","in":[0,0,0],"out":0,"attn":{"heads":-1}}]}`))
	f.Add([]byte(`{}`))
	// recurrent steps over the stories weights: a causal convolution of
	// kernel 64, and a gated delta rule of 64 value heads over 1 key head
	f.Add([]byte(`{"version":1,"rows":1,"arena":960,"buffers":[{"rows":1,"cols":64,"offset":0},{"rows":1,"cols":512,"offset":64},` +
		`{"rows":1,"cols":256,"offset":576},{"rows":1,"cols":64,"offset":832},{"rows":1,"cols":64,"offset":896}],` +
		`"steps":[{"op":"embed","out":0,"weights":["model.embed_tokens.weight"]},{"op":"linear","in":[0],"out":1,"weights":["lm_head.weight"]},` +
		`{"op":"gated_delta","in":[1,0,0],"out":2,"weights":["model.norm.weight","model.norm.weight"],"slot":0,` +
		`"delta":{"key_heads":1,"value_heads":64,"key_dim":128,"value_dim":4}},` +
		`{"op":"causal_conv","in":[0],"out":3,"weights":["model.layers.0.self_attn.q_proj.weight"],"head_dim":64,"slot":1},` +
		`{"op":"columns","in":[2],"out":4,"lo":0,"hi":1,"group":4}],` +
		`"output":4,"kv":{"layers":0,"cols":0,"ctx":32},"state":[32768,4032]}`))
	mem.manifest.Plans = []plan.PlanRef{{ARLen: 1, Blob: "plan/ar1"}}
	f.Fuzz(func(t *testing.T, blob []byte) {
		mem.blobs["plan/ar1"] = blob
		e, err := engine.LoadParts(mem.manifest, mem.blob, mem.tensor, engine.Options{Threads: 1})
		if err != nil {
			return
		}
		s, err := e.NewSession(engine.SessionOptions{Threads: 2})
		if err != nil {
			return
		}
		defer s.Close()
		if _, err := s.Prefill([]int{1, 2, 3}); err != nil {
			return
		}
		_, _ = s.Decode(4)
	})
}
