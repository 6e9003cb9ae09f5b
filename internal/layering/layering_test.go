package layering

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/aotlm/aotlm/"

// allowed lists, for each package, the project packages it may import
// (directly or not). A package missing here may import nothing of ours.
var allowed = map[string][]string{
	"internal/tensor":             {},
	"internal/mmapfile":           {},
	"internal/format":             {"internal/tensor"},
	"internal/format/gguf":        {"internal/format", "internal/tensor", "internal/mmapfile"},
	"internal/format/safetensors": {"internal/format", "internal/tensor", "internal/mmapfile"},
	"internal/format/llama2c":     {"internal/format", "internal/tensor", "internal/mmapfile"},
	"internal/format/pytorch":     {"internal/format", "internal/tensor", "internal/mmapfile"},
	"internal/format/detect": {"internal/format", "internal/tensor", "internal/format/gguf",
		"internal/format/safetensors", "internal/format/llama2c", "internal/format/pytorch", "internal/mmapfile"},
	"internal/tokenizer": {},
	"internal/chat":      {},
	"internal/sample":    {},
	"internal/decoding":  {"internal/sample"},
	"internal/graph":     {},
	"internal/quant":     {"internal/tensor"},
	"internal/artifact":  {"internal/tensor", "internal/mmapfile"},
	"internal/plan":      {},
	"internal/kernel":    {"internal/tensor"},
	// the engine runs plans: it never sees graphs, families or checkpoints
	"internal/engine":   {"internal/plan", "internal/artifact", "internal/tensor", "internal/mmapfile", "internal/kernel"},
	"internal/arch":     {"internal/graph", "internal/format", "internal/tensor"},
	"internal/testutil": {},
	// the Hub client knows HTTP and the cache layout, nothing of models
	"internal/hf/hub":         {},
	"internal/hf/hub/hubtest": {},
	"internal/eval":           {"internal/decoding", "internal/sample", "internal/tokenizer"},
	// bench measures compiled artifacts through the engine only
	"internal/bench": {"internal/engine", "internal/plan", "internal/artifact", "internal/tensor", "internal/mmapfile", "internal/kernel"},
}

// TestImportsPointDown runs `go list -deps` on every package and checks its
// project dependencies against the allow-list.
func TestImportsPointDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}:{{join .Deps " "}}`, module+"internal/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, ":")
		rel := strings.TrimPrefix(pkg, module)
		ok, listed := allowed[rel]
		if !listed {
			continue // upper layers (model, textgen, ...) may import below them
		}
		for _, d := range strings.Fields(deps) {
			if !strings.HasPrefix(d, module) {
				continue
			}
			dr := strings.TrimPrefix(d, module)
			if !contains(ok, dr) {
				t.Errorf("%s imports %s, which is not below it", rel, dr)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
