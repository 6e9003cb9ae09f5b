package compile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestMTPCompiled checks that the qwen35 fixture's artifact lists the
// draft head's plans, that the model's plans keep their hidden rows, and
// that a copy of the folder without the head's tensors compiles without
// it, saying why in the provenance (so that the cache keeps it).
func TestMTPCompiled(t *testing.T) {
	dir := t.TempDir()
	full := filepath.Join(dir, "full.aot")
	src := testutil.Path(t, "arch/qwen35")
	if err := CompileFile(src, full, Options{ARLens: []int{4}, Ctx: 32}); err != nil {
		t.Fatal(err)
	}
	m := manifestOf(t, full)
	if m.MTP == nil || len(m.MTP.Plans) != 2 || lacksMTP(m) {
		t.Fatalf("the artifact's draft head: %+v", m.MTP)
	}

	// the folder without the mtp.* tensors
	ck, err := detect.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var ts []safetensors.Tensor
	for _, info := range ck.Tensors() {
		if strings.HasPrefix(info.Name, "mtp.") {
			continue
		}
		v, err := ck.ReadFloat32(info.Name)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, safetensors.Tensor{Name: info.Name, DType: tensor.F32, Shape: info.Shape, Data: v})
	}
	cut := filepath.Join(dir, "cut")
	if err := os.Mkdir(cut, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cut, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.Write(filepath.Join(cut, "model.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "cut.aot")
	if err := CompileFile(cut, out, Options{ARLens: []int{4}, Ctx: 32}); err != nil {
		t.Fatal(err)
	}
	m = manifestOf(t, out)
	why, _ := m.Provenance["mtp"].(string)
	if m.MTP != nil || !strings.Contains(why, "mtp.") || lacksMTP(m) {
		t.Fatalf("without the head's tensors: head %+v, provenance %q", m.MTP, why)
	}
	// a source without the head (a model in memory, a quantized folder)
	am, err := arch.Open(ck)
	if err != nil {
		t.Fatal(err)
	}
	mem := filepath.Join(dir, "mem.aot")
	if err := CompileModel(&arch.Model{Config: am.Config, Weights: readAll(t, am)}, Source{}, Options{ARLens: []int{4}, Ctx: 32}, mem); err != nil {
		t.Fatal(err)
	}
	if mm := manifestOf(t, mem); mm.MTP != nil || mm.Provenance["mtp"] == nil || lacksMTP(mm) {
		t.Fatalf("a model in memory: head %+v, provenance %v", mm.MTP, mm.Provenance)
	}
	// an artifact compiled before heads were: the cache compiles it again
	m.Provenance = nil
	if !lacksMTP(m) {
		t.Error("a qwen35 artifact without a head and without a reason is kept")
	}
}

// readAll reads every weight of m's graph.
func readAll(t *testing.T, m *arch.Source) graph.Weights {
	t.Helper()
	w := graph.Weights{}
	for _, n := range m.Names() {
		v, err := m.Read(n)
		if err != nil {
			t.Fatal(err)
		}
		w[n] = v
	}
	return w
}

func manifestOf(t *testing.T, path string) *plan.Manifest {
	t.Helper()
	a, err := artifact.Open(path, artifact.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var m plan.Manifest
	if err := a.Manifest(&m); err != nil {
		t.Fatal(err)
	}
	return &m
}
