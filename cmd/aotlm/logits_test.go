package main

import (
	"bytes"
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
	ref := testutil.ReadArchReference(t, "qwen3")
	dir := testutil.Path(t, "arch/qwen3")
	aot := filepath.Join(t.TempDir(), "qwen3.aot")
	if err := compile.CompileFile(dir, aot, compile.Options{ARLens: []int{4}, Ctx: 64}); err != nil {
		t.Fatal(err)
	}
	logits := logitsFixtureRunner(t, ref)
	for _, c := range [][]string{{dir, "hybrid"}, {aot, "hybrid"}, {aot, "kv"}} {
		if d := maxLogitDiff(logits(c[0], c[1]), ref.Logits); d > 1e-3 {
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
