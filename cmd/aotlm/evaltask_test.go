package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// TestEvalCommand runs both tasks on stories260K: a two-task hellaswag
// file whose right endings continue the story as TinyStories would and
// whose wrong ones are noise (the model must pick the right ones), and the
// first LAMBADA passages (accuracy in [0, 1], a finite perplexity above 1).
// Bad task names and malformed files are refused.
func TestEvalCommand(t *testing.T) {
	m := testutil.Path(t, "models/stories260K/stories260K.gguf")
	dir := t.TempDir()
	hs := filepath.Join(dir, "hs.txt")
	tasks := "Once upon a time, there was a little girl named Lily. She loved to play\n1\nzq xv kkj qqp.\noutside in the park with her friends.\nvbn mmw rrt.\nplk ddr wwq.\n" +
		"Tom had a big red ball. He liked to\n2\nxq zzv pp.\nqqk jjv.\nplay with it every day.\nmmr tty.\n"
	if err := os.WriteFile(hs, []byte(tasks), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "eval", "-m", m, "--task", "hellaswag", "--data", hs, "--json")
	if code != 0 {
		t.Fatalf("eval hellaswag: %s", errOut)
	}
	var r struct {
		Tasks   int     `json:"tasks"`
		Acc     float64 `json:"acc"`
		AccNorm float64 `json:"acc_norm"`
		Pred    []int   `json:"pred_norm"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Tasks != 2 || r.AccNorm != 1 || r.Acc != 1 || len(r.Pred) != 2 || r.Pred[0] != 1 || r.Pred[1] != 2 {
		t.Errorf("hellaswag: %+v", r)
	}
	code, out, errOut = runCLI(t, "eval", "-m", m, "--task", "lambada", "--data", testutil.Path(t, "text/lambada_test.jsonl"), "--limit", "5", "--json")
	if code != 0 {
		t.Fatalf("eval lambada: %s", errOut)
	}
	var l struct {
		Items int     `json:"items"`
		Acc   float64 `json:"acc"`
		PPL   float64 `json:"ppl"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	if l.Items != 5 || l.Acc < 0 || l.Acc > 1 || !(l.PPL > 1) {
		t.Errorf("lambada: %+v", l)
	}
	bad := filepath.Join(dir, "bad.txt")
	os.WriteFile(bad, []byte("ctx\n9\na\nb\nc\nd\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--task", "mmlu", "--data", hs}, "mmlu"},
		{[]string{"--task", "hellaswag", "--data", bad}, "gold index"},
		{[]string{"--task", "hellaswag", "--data", filepath.Join(dir, "missing")}, "missing"},
	} {
		code, _, errOut := runCLI(t, append([]string{"eval", "-m", m}, c.args...)...)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q, want an error naming %q", c.args, code, errOut, c.want)
		}
	}
}
