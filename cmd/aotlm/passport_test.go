package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/passport"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestQuantizePassport: quantize --passport stores the float, qdq and
// artifact phases measured on the text in the folder; compile carries
// them into the artifact, inspect prints them and the opened model
// exposes them, and ppl --phases on the same chunks gives the same
// figures. An artifact compiled without one has none.
func TestQuantizePassport(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	text := testutil.Path(t, "text/TinyStories-valid-excerpt.txt")
	dir := t.TempDir()
	q := filepath.Join(dir, "q")
	code, _, stderr := runCLI(t, "quantize", src, "-o", q, "--recipe", "lpbq4-h6", "--passport", text, "--passport-chunks", "2")
	if code != 0 {
		t.Fatalf("quantize: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "passport: recipe lpbq4-h6, text TinyStories-valid-excerpt.txt") {
		t.Errorf("quantize did not print the passport: %s", stderr)
	}
	aot := filepath.Join(dir, "m.aot")
	if code, _, stderr := runCLI(t, "compile", q, "-o", aot); code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	m, err := aotlm.Open(aot, aotlm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	p, err := passport.Parse(m.Info().Passport)
	m.Close()
	if err != nil || p == nil {
		t.Fatalf("artifact passport: %v, %v", p, err)
	}
	if p.Recipe != "lpbq4-h6" || p.Ctx != 256 || p.Chunks != 2 || p.Tokens != 2*127 || len(p.Phases) != 3 {
		t.Fatalf("passport %+v", p)
	}
	for i, name := range []string{"float", "qdq", "artifact"} {
		if p.Phases[i].Name != name || !(p.Phases[i].PPL > 1) {
			t.Errorf("phase %d: %+v", i, p.Phases[i])
		}
	}
	if p.Phases[0].KL != 0 || p.Phases[1].KL <= 0 || p.Phases[2].PPL <= p.Phases[0].PPL {
		t.Errorf("float KL %v, qdq KL %v, artifact ppl %v vs float %v: a 4-bit model should move away from the float one",
			p.Phases[0].KL, p.Phases[1].KL, p.Phases[2].PPL, p.Phases[0].PPL)
	}
	code, stdout, stderr := runCLI(t, "ppl", "-m", q, "--data", text, "--ctx", "256", "--chunks", "2", "--phases", "float,qdq", "--json")
	if code != 0 {
		t.Fatalf("ppl: exit %d: %s", code, stderr)
	}
	var ph struct {
		Phases []struct {
			PPL float64 `json:"ppl"`
			KL  float64 `json:"kl"`
		} `json:"phases"`
	}
	if err := json.Unmarshal([]byte(stdout), &ph); err != nil || len(ph.Phases) != 2 {
		t.Fatalf("ppl --json: %v: %s", err, stdout)
	}
	if ph.Phases[0].PPL != p.Phases[0].PPL || ph.Phases[1].PPL != p.Phases[1].PPL || ph.Phases[1].KL != p.Phases[1].KL {
		t.Errorf("ppl --phases %+v, passport %+v", ph.Phases, p.Phases)
	}
	code, stdout, stderr = runCLI(t, "inspect", aot)
	if code != 0 || !strings.Contains(stdout, "passport: recipe lpbq4-h6") || !strings.Contains(stdout, "artifact  ppl ") {
		t.Errorf("inspect: exit %d: %s%s", code, stdout, stderr)
	}

	plain := filepath.Join(dir, "plain.aot")
	if code, _, stderr := runCLI(t, "compile", src, "-o", plain); code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	m, err = aotlm.Open(plain, aotlm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Info().Passport != nil {
		t.Errorf("an artifact without a passport has %s", m.Info().Passport)
	}
}
