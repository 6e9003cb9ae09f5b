package engine_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/tensor"
)

// parts is an artifact taken apart, to be rewritten with changes.
type parts struct {
	manifest map[string]any
	blobs    map[string][]byte
	kinds    map[string]artifact.Kind
	tensors  []artifact.TensorInfo
	data     map[string][]byte
}

// compiledParts compiles the tiny model (AR lengths 1 and 4) and takes the
// artifact apart.
func compiledParts(t testing.TB) (string, *parts) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.aot")
	if err := compile.CompileModel(tinyModel(t), compile.Source{}, compile.Options{ARLens: []int{4}, Ctx: 32}, path); err != nil {
		t.Fatal(err)
	}
	return path, takeApart(t, path)
}

// takeApart reads every part of the artifact at path.
func takeApart(t testing.TB, path string) *parts {
	t.Helper()
	a, err := artifact.Open(path, artifact.OpenOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	p := &parts{blobs: map[string][]byte{}, kinds: map[string]artifact.Kind{}, data: map[string][]byte{}}
	if err := a.Manifest(&p.manifest); err != nil {
		t.Fatal(err)
	}
	for _, s := range a.Blobs() {
		b, err := a.Blob(s.Name)
		if err != nil {
			t.Fatal(err)
		}
		p.blobs[s.Name] = append([]byte(nil), b...)
		p.kinds[s.Name] = s.Kind
	}
	p.tensors = a.Tensors()
	for _, ti := range p.tensors {
		_, b, err := a.Tensor(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		p.data[ti.Name] = append([]byte(nil), b...)
	}
	return p
}

// write stores p as a valid artifact (checksums and all) and returns its path.
func (p *parts) write(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "rewritten.aot")
	w, err := artifact.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	for _, ti := range p.tensors {
		if err := w.AddTensor(ti.Name, ti.DType, ti.Shape, ti.Layout, p.data[ti.Name]); err != nil {
			t.Fatal(err)
		}
	}
	for name, b := range p.blobs {
		if err := w.AddBlob(p.kinds[name], name, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.SetManifest(p.manifest); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	return path
}

// editPlan decodes a plan blob without validation, changes it, re-encodes it.
func (p *parts) editPlan(t testing.TB, name string, f func(pl *plan.Plan)) {
	var pl plan.Plan
	if err := json.Unmarshal(p.blobs[name], &pl); err != nil {
		t.Fatal(err)
	}
	f(&pl)
	b, err := json.Marshal(&pl)
	if err != nil {
		t.Fatal(err)
	}
	p.blobs[name] = b
}

func TestRewrittenArtifactRuns(t *testing.T) {
	_, p := compiledParts(t)
	e, err := engine.Open(p.write(t, t.TempDir()))
	if err != nil {
		t.Fatalf("an unchanged rewrite is refused: %v", err)
	}
	defer e.Close()
}

// TestCorruptBytesRefused flips one byte inside each plan blob and the
// manifest of a compiled file: the artifact checksums must refuse it.
func TestCorruptBytesRefused(t *testing.T) {
	path, _ := compiledParts(t)
	a, err := artifact.Open(path, artifact.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secs := a.Sections()
	a.Close()
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secs {
		if s.Kind != artifact.KindPlan && s.Kind != artifact.KindManifest {
			continue
		}
		b := append([]byte(nil), orig...)
		b[s.Offset+s.Size/2] ^= 0x20
		bad := filepath.Join(t.TempDir(), "bad.aot")
		if err := os.WriteFile(bad, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := engine.Open(bad)
		var fe *artifact.FormatError
		if !errors.As(err, &fe) || fe.Section != s.Name {
			t.Errorf("byte flipped in %s: got %v", s.Name, err)
		}
	}
}

// TestBadContentRefused rewrites valid artifacts (correct checksums) whose
// manifest, plans or weights are wrong; Open must name what is wrong.
func TestBadContentRefused(t *testing.T) {
	cases := []struct {
		name, want string
		edit       func(t *testing.T, p *parts)
	}{
		{"buffer id out of range", "steps[2].in[0]", func(t *testing.T, p *parts) {
			p.editPlan(t, "plan/ar1", func(pl *plan.Plan) { pl.Steps[2].In[0] = len(pl.Buffers) })
		}},
		{"arena overflow", ".offset", func(t *testing.T, p *parts) {
			p.editPlan(t, "plan/ar4", func(pl *plan.Plan) { pl.Arena = 8 })
		}},
		{"unknown op", "unknown op", func(t *testing.T, p *parts) {
			p.blobs["plan/ar1"] = []byte(strings.Replace(string(p.blobs["plan/ar1"]), `"op":"silu"`, `"op":"swish"`, 1))
		}},
		{"cache layer", "attn.layer", func(t *testing.T, p *parts) {
			p.editPlan(t, "plan/ar1", func(pl *plan.Plan) { pl.KV.Layers = 1 })
		}},
		{"plan rows disagree", "plan of 1 rows", func(t *testing.T, p *parts) {
			p.manifest["plans"].([]any)[0].(map[string]any)["ar_len"] = 2
			p.manifest["plans"] = append(p.manifest["plans"].([]any), map[string]any{"ar_len": 1, "blob": "plan/ar4"})
		}},
		{"missing plan blob", "plan/ar9", func(t *testing.T, p *parts) {
			p.manifest["plans"].([]any)[1].(map[string]any)["blob"] = "plan/ar9"
		}},
		{"no decode plan", "AR-1", func(t *testing.T, p *parts) { p.manifest["plans"] = p.manifest["plans"].([]any)[1:] }},
		{"manifest format", "manifest.format", func(t *testing.T, p *parts) { p.manifest["format"] = "other" }},
		{"manifest vocab", "manifest.vocab", func(t *testing.T, p *parts) { p.manifest["vocab"] = -4 }},
		{"weights layout", "weights layout", func(t *testing.T, p *parts) { p.manifest["weights"] = "w4" }},
		{"missing weight", "model.norm.weight", func(t *testing.T, p *parts) {
			for i, ti := range p.tensors {
				if ti.Name == "model.norm.weight" {
					p.tensors = append(p.tensors[:i], p.tensors[i+1:]...)
					break
				}
			}
		}},
		{"weight shape", "model.norm.weight", func(t *testing.T, p *parts) {
			for i, ti := range p.tensors {
				if ti.Name == "model.norm.weight" {
					p.tensors[i].Shape = []int64{ti.Shape[0] / 2, 2}
				}
			}
		}},
		{"weight dtype", "unsupported", func(t *testing.T, p *parts) {
			for i, ti := range p.tensors {
				if ti.Name == "model.norm.weight" {
					p.tensors[i].DType = tensor.I32
				}
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, p := compiledParts(t)
			c.edit(t, p)
			e, err := engine.Open(p.write(t, t.TempDir()))
			if err == nil {
				e.Close()
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
		})
	}
}
