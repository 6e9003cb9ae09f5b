package model_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/aotlm/aotlm/internal/decoding"
	"github.com/aotlm/aotlm/internal/model"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestGraniteHybridFixture checks Granite 4 hybrid (Mamba2 layers between
// attention layers) against llama.cpp as TestArchFixtures does the other
// families: the logits of every position from the HF folder and from the
// GGUF within 1e-3, and the 16 greedy ids, decoded with the convolution
// and scan states carried from step to step.
func TestGraniteHybridFixture(t *testing.T) {
	var ref archRef
	if err := json.Unmarshal(testutil.ReadFile(t, "arch/granitehybrid/reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	dir := testutil.Path(t, "arch/granitehybrid")
	for _, path := range []string{dir, dir + "/model.gguf"} {
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
		if d > 1e-3 {
			t.Errorf("%s: logits differ from llama.cpp by %.3g (tolerance 1e-3)", path, d)
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
			t.Errorf("%s: greedy %v, llama.cpp %v", path, res.IDs, ref.Greedy)
		}
	}
}
