package testutil

import (
	"encoding/json"
	"testing"
)

// GreedyCase is one case of llama2.c run.c's greedy reference for
// stories260K: the prompt, its BOS-prefixed ids, the 64 generated ids and
// their text.
type GreedyCase struct {
	Prompt    string `json:"prompt"`
	PromptIDs []int  `json:"prompt_ids"`
	IDs       []int  `json:"ids"`
	Text      string `json:"text"`
}

// GreedyReference holds the cases of reference/llama2c-stories260K-greedy.json.
type GreedyReference struct {
	Cases []GreedyCase `json:"cases"`
}

// StoriesGreedy reads llama2.c's greedy reference for stories260K, with
// Path's skip/fail rule, and fails the test if it holds no case.
func StoriesGreedy(t testing.TB) GreedyReference {
	t.Helper()
	var ref GreedyReference
	if err := json.Unmarshal(ReadFile(t, "reference/llama2c-stories260K-greedy.json"), &ref); err != nil {
		t.Fatalf("reference/llama2c-stories260K-greedy.json: %v", err)
	}
	if len(ref.Cases) == 0 {
		t.Fatal("reference/llama2c-stories260K-greedy.json holds no case")
	}
	return ref
}

// ArchReference is an arch fixture's reference.json (arch/<family>/):
// llama.cpp's logits at every position of Tokens fed in one batch, its
// greedy ids, and for the recurrent families the last logits after a
// prefill split in two calls at Split.K.
type ArchReference struct {
	Tokens []int       `json:"tokens"`
	Logits [][]float32 `json:"logits"`
	Greedy []int       `json:"greedy"`
	Split  struct {
		K    int       `json:"k"`
		Last []float32 `json:"logits_after_split"`
	} `json:"split_prefill"`
}

// ReadArchReference reads arch/<family>/reference.json with Path's
// skip/fail rule.
func ReadArchReference(t testing.TB, family string) ArchReference {
	t.Helper()
	var ref ArchReference
	if err := json.Unmarshal(ReadFile(t, "arch/"+family+"/reference.json"), &ref); err != nil {
		t.Fatalf("arch/%s/reference.json: %v", family, err)
	}
	return ref
}

// archWithoutGGUF lists the arch fixtures that have no model.gguf:
// llama.cpp cannot convert their family, so their reference comes from
// an independent transcription of the Hugging Face code (arch/README.md).
var archWithoutGGUF = map[string]bool{"codegen2": true}

// ArchModelPaths returns the models of arch/<family> by source, with
// Path's skip/fail rule: "hf" its folder and, unless the fixture has
// none, "gguf" llama.cpp's conversion.
func ArchModelPaths(t testing.TB, family string) map[string]string {
	t.Helper()
	dir := Path(t, "arch/"+family)
	paths := map[string]string{"hf": dir}
	if !archWithoutGGUF[family] {
		paths["gguf"] = Path(t, "arch/"+family+"/model.gguf")
	}
	return paths
}
