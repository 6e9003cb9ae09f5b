package model_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/aotlm/aotlm/internal/decoding"
	"github.com/aotlm/aotlm/internal/model"
	"github.com/aotlm/aotlm/internal/testutil"
)

// checkFamilyFixture opens each of paths (a folder or a GGUF of the
// arch/<family> fixture) and checks it against llama.cpp's
// reference.json: the logits of every position in one batch within tol,
// and the greedy ids decoded from a fresh session.
func checkFamilyFixture(t *testing.T, family string, tol float64, paths ...string) {
	t.Helper()
	var ref archRef
	if err := json.Unmarshal(testutil.ReadFile(t, "arch/"+family+"/reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	for _, path := range paths {
		m, err := model.Open(path, model.Options{Threads: 2})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		s, err := m.NewSession(256)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Logits(ref.Tokens)
		if err != nil {
			t.Fatal(err)
		}
		var d float64
		for i := range ref.Logits {
			d = max(d, maxDiff(got[i], ref.Logits[i]))
		}
		t.Logf("%s: max |logit diff| %.3g over %d positions", path, d, len(ref.Logits))
		if d > tol {
			t.Errorf("%s: logits differ from the reference by %.3g (tolerance %g)", path, d, tol)
		}
		s2, err := m.NewSession(256)
		if err != nil {
			t.Fatal(err)
		}
		res, err := decoding.Generate(s2, ref.Tokens, decoding.Options{MaxTokens: len(ref.Greedy)})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.IDs, ref.Greedy) {
			t.Errorf("%s: greedy %v, reference %v", path, res.IDs, ref.Greedy)
		}
	}
}

// familyFixturePaths returns the fixture arch/<family>'s HF folder and
// its GGUF, when it has one.
func familyFixturePaths(t *testing.T, family string) []string {
	paths := testutil.ArchModelPaths(t, family)
	out := []string{paths["hf"]}
	if p, ok := paths["gguf"]; ok {
		out = append(out, p)
	}
	return out
}

// copyFixtureWeights copies the fixture folder's config.json and
// model.safetensors into a temporary folder, without its tokenizer.
func copyFixtureWeights(t *testing.T, fixture string) string {
	t.Helper()
	dir := t.TempDir()
	testutil.CopyFiles(t, fixture, dir, "config.json", "model.safetensors")
	return dir
}
