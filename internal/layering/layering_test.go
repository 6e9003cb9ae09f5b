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
	"internal/limits":             {},
	"internal/userfile":           {"internal/limits"},
	"internal/termsafe":           {},
	"internal/output":             {},
	"internal/mmapfile":           {},
	"internal/hugemem":            {},
	"internal/format":             {"internal/tensor"},
	"internal/format/gguf":        {"internal/format", "internal/tensor", "internal/mmapfile"},
	"internal/format/safetensors": {"internal/format", "internal/tensor", "internal/mmapfile", "internal/limits"},
	"internal/format/llama2c":     {"internal/format", "internal/tensor", "internal/mmapfile"},
	"internal/format/pytorch":     {"internal/format", "internal/tensor", "internal/mmapfile"},
	"internal/format/detect": {"internal/format", "internal/tensor", "internal/format/gguf",
		"internal/format/safetensors", "internal/format/llama2c", "internal/format/pytorch", "internal/mmapfile", "internal/limits"},
	"internal/tokenizer": {"internal/limits"},
	"internal/chat":      {"internal/limits"},
	"internal/sample":    {"internal/kernel", "internal/tensor"}, // greedy picks use kernel.Argmax
	// the runtime's generation defaults read through it: nothing else
	"internal/gendefaults": {"internal/sample", "internal/kernel", "internal/tensor"},
	"internal/constrain":   {},
	// decoding strategies verify their guesses through engine passes
	"internal/decoding": {"internal/sample", "internal/engine", "internal/op", "internal/plan", "internal/artifact",
		"internal/tensor", "internal/mmapfile", "internal/kernel", "internal/output", "internal/limits", "internal/hugemem"},
	"internal/op": {},
	// the ONNX wire format knows protobuf, nothing of models
	"internal/onnx": {},
	// the quality record is data: it imports nothing of ours
	"internal/passport": {},
	"internal/graph":    {"internal/op", "internal/kernel", "internal/tensor"},
	"internal/quant":    {"internal/tensor", "internal/kernel"},
	"internal/artifact": {"internal/tensor", "internal/mmapfile", "internal/output"},
	"internal/plan":     {"internal/op"},
	"internal/kernel":   {"internal/tensor"},
	// the engine runs plans: it never sees graphs, families or checkpoints
	"internal/engine":   {"internal/op", "internal/plan", "internal/artifact", "internal/tensor", "internal/mmapfile", "internal/kernel", "internal/output", "internal/limits", "internal/hugemem"},
	"internal/arch":     {"internal/op", "internal/graph", "internal/format", "internal/tensor", "internal/kernel"},
	"internal/testutil": {},
	"internal/demo":     {},
	"internal/vision":   {},
	// the Hub client knows HTTP and the cache layout, nothing of models
	"internal/hf/hub":         {},
	"internal/hf/hub/hubtest": {},
	"internal/eval": {"internal/decoding", "internal/sample", "internal/tokenizer", "internal/limits", "internal/engine", "internal/op",
		"internal/plan", "internal/artifact", "internal/tensor", "internal/mmapfile", "internal/kernel", "internal/output", "internal/hugemem"},
	// bench measures compiled artifacts through the engine only
	"internal/bench": {"internal/engine", "internal/passport", "internal/op", "internal/plan", "internal/artifact", "internal/tensor", "internal/mmapfile", "internal/kernel", "internal/output", "internal/limits", "internal/hugemem"},
}

// foundation are the packages every layer may import: resource limits,
// the one reader of user-named files, and terminal-safe text. They import
// nothing of ours above them (their own entries above say so).
var foundation = []string{"internal/limits", "internal/userfile", "internal/termsafe"}

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
			continue // upper layers (model, hf, the runtime, ...) may import below them
		}
		for _, d := range strings.Fields(deps) {
			if !strings.HasPrefix(d, module) {
				continue
			}
			dr := strings.TrimPrefix(d, module)
			if !contains(ok, dr) && (!contains(foundation, dr) || contains(foundation, rel)) {
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

// TestRuntimeLinksNoCompiler: the runtime package at the module root
// opens artifacts only; no checkpoint reader, family, graph or compiler is
// linked into a program that uses it.
func TestRuntimeLinksNoCompiler(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Deps " "}}`, strings.TrimSuffix(module, "/")).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if !contains(deps, module+"internal/engine") {
		t.Fatalf("the runtime does not link the engine: %v", deps)
	}
	for _, banned := range []string{"internal/compile", "internal/arch", "internal/graph", "internal/format",
		"internal/quant", "internal/qmodel", "internal/hf", "internal/model"} {
		for _, d := range deps {
			if d == module+banned || strings.HasPrefix(d, module+banned+"/") {
				t.Errorf("the runtime links %s", d)
			}
		}
	}
}
