package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// TestCompileAndRunArtifact compiles stories260K (from the GGUF, and from the
// llama2.c file with its tokenizer) and runs the artifact from text in
// hybrid and kv modes: the prompt encodes with the tokenizer stored in the
// artifact, and the greedy ids are llama2.c's run.c reference ids.
func TestCompileAndRunArtifact(t *testing.T) {
	var ref struct {
		Cases []struct {
			Prompt    string `json:"prompt"`
			PromptIDs []int  `json:"prompt_ids"`
			IDs       []int  `json:"ids"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(testutil.ReadFile(t, "reference/llama2c-stories260K-greedy.json"), &ref); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sources := map[string][]string{
		"gguf":    {testutil.Path(t, "models/stories260K/stories260K.gguf")},
		"llama2c": {testutil.Path(t, "llama2c/stories260K.bin"), "--tokenizer", testutil.Path(t, "llama2c/tok512-dratman/tok512.bin")},
	}
	for name, src := range sources {
		out := filepath.Join(dir, name+".aot")
		args := append([]string{"compile"}, src...)
		args = append(args, "-o", out, "--ar-len", "4", "--ctx", "128")
		if code, _, stderr := aotlm(t, args...); code != 0 {
			t.Fatalf("%s: compile exit %d: %s", name, code, stderr)
		}
		for _, mode := range []string{"hybrid", "kv"} {
			for _, c := range ref.Cases[1:] {
				code, stdout, stderr := aotlm(t, "run", "-m", out, "--mode", mode, "-p", c.Prompt,
					"-n", "24", "--temp", "0", "--json", "--ignore-eos")
				if code != 0 {
					t.Fatalf("%s %s: exit %d: %s", name, mode, code, stderr)
				}
				var rep runJSON
				if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(rep.PromptIDs, c.PromptIDs) || !slices.Equal(rep.IDs, c.IDs[:24]) {
					t.Errorf("%s %s %q: prompt %v ids %v, want %v %v", name, mode, c.Prompt, rep.PromptIDs, rep.IDs, c.PromptIDs, c.IDs[:24])
				}
			}
		}
	}
	// a prompt longer than the compiled context is refused
	long := strings.Repeat("Once upon a time there was a dog. ", 40)
	code, _, stderr := aotlm(t, "run", "-m", filepath.Join(dir, "gguf.aot"), "-p", long)
	if code != 1 || !strings.Contains(stderr, "context") {
		t.Errorf("over-long prompt: exit %d, %q", code, stderr)
	}
}
