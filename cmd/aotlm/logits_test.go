package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
)

// runLogits runs the logits command under a local root.
func runLogits(args ...string) (string, error) {
	root := &cobra.Command{Use: "aotlm", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newLogitsCmd())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"logits"}, args...))
	err := root.Execute()
	return out.String(), err
}

// TestLogitsCommand prints the qwen3 fixture's logits from the HF folder
// and from a compiled artifact in both modes, and compares them with
// llama.cpp's (reference.json) within the fixture tolerance 1e-3.
func TestLogitsCommand(t *testing.T) {
	var ref struct {
		Tokens []int       `json:"tokens"`
		Logits [][]float32 `json:"logits"`
	}
	if err := json.Unmarshal(testutil.ReadFile(t, "arch/qwen3/reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	dir := testutil.Path(t, "arch/qwen3")
	aot := filepath.Join(t.TempDir(), "qwen3.aot")
	if err := compile.CompileFile(dir, aot, compile.Options{ARLens: []int{4}, Ctx: 64}); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(ref.Tokens))
	for i, id := range ref.Tokens {
		ids[i] = fmt.Sprint(id)
	}
	idArg := strings.Join(ids, ",")
	for _, c := range [][]string{{dir, "hybrid"}, {aot, "hybrid"}, {aot, "kv"}} {
		out, err := runLogits("-m", c[0], "--ids", idArg, "--mode", c[1], "--json")
		if err != nil {
			t.Fatalf("%s %s: %v", c[0], c[1], err)
		}
		var got struct {
			Logits [][]float32 `json:"logits"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%s %s: output is not one JSON object: %v", c[0], c[1], err)
		}
		if len(got.Logits) != len(ref.Logits) {
			t.Fatalf("%s %s: %d rows, want %d", c[0], c[1], len(got.Logits), len(ref.Logits))
		}
		var d float64
		for i := range ref.Logits {
			if len(got.Logits[i]) != len(ref.Logits[i]) {
				t.Fatalf("row %d: %d logits, want %d", i, len(got.Logits[i]), len(ref.Logits[i]))
			}
			for j, want := range ref.Logits[i] {
				d = math.Max(d, math.Abs(float64(got.Logits[i][j]-want)))
			}
		}
		if d > 1e-3 {
			t.Errorf("%s %s: logits differ from llama.cpp by %.3g (tolerance 1e-3)", c[0], c[1], d)
		}
	}
	out, err := runLogits("-m", dir, "--ids", "5,17")
	if err != nil || strings.Count(out, "\n") != 2 {
		t.Errorf("plain output %q, %v: want two lines", out, err)
	}
}

func TestLogitsCommandErrors(t *testing.T) {
	dir := testutil.Path(t, "arch/qwen3")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--ids", "1"}, "no model"},
		{[]string{"-m", dir}, "no ids"},
		{[]string{"-m", dir, "--ids", "1", "--mode", "lookahead"}, "--mode"},
		{[]string{"-m", dir, "--ids", "1,99999"}, "position 1"},
		{[]string{"-m", dir, "--ids", "1,x"}, "ids"},
	} {
		if _, err := runLogits(c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error naming %q", c.args, err, c.want)
		}
	}
}
