package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
)

// loraDir is the qwen3 fixture's adapter and llama.cpp's logits with it
// (internal/lora/oracle_test.go tells how they were made).
const loraDir = "../../internal/lora/testdata/qwen3"

// TestCompileLoRAMatchesLlamaCpp compiles the qwen3 fixture's GGUF with
// its PEFT adapter merged at scale 0.5 and checks `aotlm logits` of the
// artifact against llama.cpp's logits with the adapter at 0.5.
func TestCompileLoRAMatchesLlamaCpp(t *testing.T) {
	model := testutil.Path(t, "arch/qwen3/model.gguf")
	var ref struct {
		Tokens []int `json:"tokens"`
		Vocab  int   `json:"vocab"`
	}
	raw, err := os.ReadFile(filepath.Join(loraDir, "reference.json"))
	if err == nil {
		err = json.Unmarshal(raw, &ref)
	}
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(loraDir, "logits-scale0.5.f32"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "merged.aot")
	if code, _, stderr := runCLI(t, "compile", model, "--lora", loraDir+":0.5", "-o", out); code != 0 {
		t.Fatalf("compile --lora: %s", stderr)
	}
	ids := make([]string, len(ref.Tokens))
	for i, id := range ref.Tokens {
		ids[i] = fmt.Sprint(id)
	}
	js, err := runLogits("-m", out, "--ids", strings.Join(ids, ","), "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Logits [][]float32 `json:"logits"`
	}
	if err := json.Unmarshal([]byte(js), &got); err != nil || len(got.Logits) != len(ref.Tokens) {
		t.Fatalf("logits: %v, %d rows", err, len(got.Logits))
	}
	var d float64
	for i, row := range got.Logits {
		for j, v := range row {
			want := math.Float32frombits(binary.LittleEndian.Uint32(b[4*(i*ref.Vocab+j):]))
			d = math.Max(d, math.Abs(float64(v-want)))
		}
	}
	t.Logf("compile --lora :0.5: max |logit diff| from llama.cpp %.3g", d)
	if d > 1e-3 {
		t.Errorf("compile --lora: logits differ from llama.cpp's by %.3g", d)
	}
}

// TestRunLoRA: `run --lora --lora-f32` (the adapter beside the base
// weights, exact) decodes the ids the merged artifact does, which differ
// from the base model's, and so does an artifact that carries the
// adapter (compile --adapter) when run chooses it by name; inspect lists
// it; two adapters for one session are refused; --lora-q8 applies the
// adapter in 8 bits, and with --lora-f32 is refused.
func TestRunLoRA(t *testing.T) {
	t.Setenv(compile.CacheEnv, t.TempDir())
	model := testutil.Path(t, "arch/qwen3/model.gguf")
	merged := filepath.Join(t.TempDir(), "merged.aot")
	if code, _, stderr := runCLI(t, "compile", model, "--lora", loraDir+":0.5", "-o", merged); code != 0 {
		t.Fatalf("compile --lora: %s", stderr)
	}
	gen := func(args ...string) []int {
		t.Helper()
		code, stdout, stderr := runCLI(t, append([]string{"run", "-p", "tok5 tok9 tok13", "-n", "16", "--temp", "0", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("run %v: %s", args, stderr)
		}
		var r runJSON
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("run %v: %v", args, err)
		}
		return r.IDs
	}
	base := gen("-m", model)
	runTime := gen("-m", model, "--lora", loraDir+":0.5", "--lora-f32")
	want := gen("-m", merged)
	if !slices.Equal(runTime, want) {
		t.Errorf("run --lora decodes %v, the merged artifact %v", runTime, want)
	}
	if slices.Equal(base, want) {
		t.Errorf("the adapter does not change the greedy ids %v", base)
	}
	// an artifact that carries the adapter: run chooses it by name, and
	// inspect lists it
	carry := filepath.Join(t.TempDir(), "carry.aot")
	if code, _, stderr := runCLI(t, "compile", model, "--adapter", "tuned="+loraDir+":0.5", "-o", carry); code != 0 {
		t.Fatalf("compile --adapter: %s", stderr)
	}
	if got := gen("-m", carry, "--lora", "tuned"); !slices.Equal(got, want) {
		t.Errorf("run --lora tuned on the carrying artifact decodes %v, the merged artifact %v", got, want)
	}
	if got := gen("-m", carry); !slices.Equal(got, base) {
		t.Errorf("the carrying artifact without --lora decodes %v, the base %v", got, base)
	}
	if code, stdout, _ := runCLI(t, "inspect", carry); code != 0 || !strings.Contains(stdout, "tuned") || !strings.Contains(stdout, "at scale 0.5: 21 linears, rank 4") {
		t.Errorf("inspect does not list the adapter: %s", stdout)
	}
	if code, _, stderr := runCLI(t, "run", "-m", model, "--lora", loraDir, "--lora", "b="+loraDir, "-p", "tok5"); code == 0 || !strings.Contains(stderr, "one adapter") {
		t.Errorf("two --lora for run: exit %d, %q", code, stderr)
	}
	// 8-bit storage runs (its rounding may change a greedy pick, so
	// only the adapter's effect is checked); two storages are refused
	if q8 := gen("-m", model, "--lora", loraDir+":0.5", "--lora-q8"); slices.Equal(q8, base) {
		t.Errorf("run --lora --lora-q8 decodes the base model's ids %v", base)
	}
	if code, _, stderr := runCLI(t, "run", "-m", model, "--lora", loraDir, "--lora-f32", "--lora-q8", "-p", "tok5"); code == 0 || !strings.Contains(stderr, "choose one storage") {
		t.Errorf("--lora-f32 and --lora-q8: exit %d, %q", code, stderr)
	}
}

// TestChatAdapterSwitch: chat loads two adapters and applies the first;
// /adapter switches to the other, to none and back, and each reply (of a
// conversation reset before it) follows the adapter chosen.
func TestChatAdapterSwitch(t *testing.T) {
	t.Setenv(compile.CacheEnv, t.TempDir())
	model := testutil.Path(t, "arch/qwen3/model.gguf")
	tpl := filepath.Join(t.TempDir(), "t.jinja")
	if err := os.WriteFile(tpl, []byte("{% for m in messages %}{{ m.content }} {% endfor %}"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "tok5 tok9\n/adapter b\n/reset\ntok5 tok9\n/adapter\n/reset\ntok5 tok9\n/adapter a\n/reset\ntok5 tok9\n"
	var out, errb bytes.Buffer
	code := runWithInput([]string{"chat", "-m", model, "--chat-template", tpl, "--temp", "0", "-n", "12", "--json", "--lora-f32",
		"--lora", "a=" + loraDir + ":0.5", "--lora", "b=" + loraDir + ":1"}, strings.NewReader(script), &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var ids [][]int
	dec := json.NewDecoder(&out)
	for dec.More() {
		var tr chatTurn
		if err := dec.Decode(&tr); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tr.IDs)
	}
	if len(ids) != 4 {
		t.Fatalf("%d turns: %s", len(ids), errb.String())
	}
	if !slices.Equal(ids[0], ids[3]) || slices.Equal(ids[0], ids[1]) || slices.Equal(ids[0], ids[2]) || slices.Equal(ids[1], ids[2]) {
		t.Errorf("replies with adapters a, b, none, a: %v", ids)
	}
}
