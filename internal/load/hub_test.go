package load

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aotlm/aotlm/internal/hf/hub"
)

// TestIsHubRef: a name of the org/name form is a Hub reference unless a
// file or folder of that name exists; a path is never one.
func TestIsHubRef(t *testing.T) {
	if !IsHubRef("unsloth/Qwen3-0.6B-GGUF:Q8_0") {
		t.Error("org/name:QUANT is not a reference")
	}
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.MkdirAll(filepath.Join("org", "name"), 0o755); err != nil {
		t.Fatal(err)
	}
	if IsHubRef("org/name") {
		t.Error("an existing folder org/name was taken for a reference")
	}
	if IsHubRef(filepath.Join(dir, "model.gguf")) {
		t.Error("an absolute path was taken for a reference")
	}
}

// TestPullRefusesABadReference before asking the Hub anything.
func TestPullRefusesABadReference(t *testing.T) {
	t.Setenv("HF_HUB_OFFLINE", "1")
	if _, _, err := Pull(context.Background(), "not a reference", nil); err == nil {
		t.Fatal("a bad reference was accepted")
	}
}

type planned struct {
	paths []string
	sizes []int64
}

func (p *planned) Plan(paths []string, sizes []int64) { p.paths, p.sizes = paths, sizes }
func (p *planned) Advance(string, int64)              {}
func (p *planned) Done(string, error)                 {}

// TestPullProgressPlan: the Hub client's planned files reach a
// PullProgress as paths and sizes, in order.
func TestPullProgressPlan(t *testing.T) {
	var p planned
	hubProgress{&p}.Plan([]hub.File{{Path: "config.json", Size: 10}, {Path: "model.safetensors", Size: 1 << 20}})
	if !slices.Equal(p.paths, []string{"config.json", "model.safetensors"}) || !slices.Equal(p.sizes, []int64{10, 1 << 20}) {
		t.Fatalf("planned %v %v", p.paths, p.sizes)
	}
}
