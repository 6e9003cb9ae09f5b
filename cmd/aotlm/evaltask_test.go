package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
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

// llamaPerplexityChoices is llama.cpp's acc_norm choice on each task of
// testdata/hellaswag-tinystories.txt for stories260K.gguf. The task file:
// 48 tasks made from testdata/text/TinyStories-valid-excerpt.txt (a
// sentence as context, the next sentence as the gold ending, three other
// sentences of the excerpt as distractors, the gold's place drawn at
// random). llama-perplexity --hellaswag (github.com/unslothai/llama.cpp
// at d32676d77, CPU build) shuffles the tasks it reads and prints only a
// running accuracy, so each task was run alone, four times, with the gold
// index set to 0, 1, 2 and 3: the index that scored 100% is its choice.
//
//	llama-perplexity -m stories260K.gguf --hellaswag -f one-task.txt -c 256 -t 1
const llamaPerplexityChoices = "0 3 2 2 3 0 3 1 3 1 2 0 2 3 2 0 3 1 2 1 2 2 3 3 0 2 0 3 0 1 0 1 2 1 1 1 2 3 0 0 1 1 2 0 0 1 1 0"

// TestHellaSwagMatchesLlamaPerplexity: aotlm eval --task hellaswag picks,
// task by task, the ending llama-perplexity --hellaswag picks, on the
// model file and on its compiled artifact.
func TestHellaSwagMatchesLlamaPerplexity(t *testing.T) {
	gguf := testutil.Path(t, "models/stories260K/stories260K.gguf")
	art := filepath.Join(t.TempDir(), "s.aot")
	if code, _, errs := runCLI(t, "compile", gguf, "-o", art, "--ctx", "256"); code != 0 {
		t.Fatalf("compile: %s", errs)
	}
	want := strings.Fields(llamaPerplexityChoices)
	for _, m := range []string{gguf, art} {
		code, out, errs := runCLI(t, "eval", "-m", m, "--task", "hellaswag", "--data", filepath.Join("testdata", "hellaswag-tinystories.txt"), "--ctx", "256", "--json")
		if code != 0 {
			t.Fatalf("eval %s: %s", m, errs)
		}
		var res struct {
			PredNorm []int `json:"pred_norm"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		if len(res.PredNorm) != len(want) {
			t.Fatalf("%s: %d choices, llama.cpp made %d", m, len(res.PredNorm), len(want))
		}
		for i, p := range res.PredNorm {
			if strconv.Itoa(p) != want[i] {
				t.Errorf("%s: task %d: aotlm chose ending %d, llama-perplexity %s", filepath.Base(m), i+1, p, want[i])
			}
		}
	}
}

// llamaMultipleChoiceRight is, task by task, whether llama-perplexity
// --multiple-choice chose the right answer of testdata/mc-tinystories.bin
// on stories260K.gguf (from the running accuracy it prints after each
// task, in file order). The file is llama.cpp's binary multiple-choice
// format holding the tasks of hellaswag-tinystories.txt, with a fifth
// answer on every third task and one wrong answer dropped from every
// fifth (3 to 5 answers), written by a 20-line script. Made with the
// llama.cpp build of llamaPerplexityChoices:
//
//	llama-perplexity -m stories260K.gguf --multiple-choice -f mc-tinystories.bin -c 256 -t 1 -np 8 --kv-unified
const llamaMultipleChoiceRight = "100010110101011110001011100001010110010001001000"

// TestMultipleChoiceMatchesLlamaPerplexity: aotlm eval --task
// multiple-choice reads llama.cpp's binary file and is right or wrong on
// the same tasks as llama-perplexity --multiple-choice.
func TestMultipleChoiceMatchesLlamaPerplexity(t *testing.T) {
	m := testutil.Path(t, "models/stories260K/stories260K.gguf")
	code, out, errs := runCLI(t, "eval", "-m", m, "--task", "multiple-choice", "--data", filepath.Join("testdata", "mc-tinystories.bin"), "--ctx", "256", "--json")
	if code != 0 {
		t.Fatalf("eval: %s", errs)
	}
	var res struct {
		Correct []bool `json:"correct_norm"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Correct) != len(llamaMultipleChoiceRight) {
		t.Fatalf("%d tasks scored, llama.cpp scored %d", len(res.Correct), len(llamaMultipleChoiceRight))
	}
	for i, ok := range res.Correct {
		if want := llamaMultipleChoiceRight[i] == '1'; ok != want {
			t.Errorf("task %d: aotlm right = %v, llama-perplexity right = %v", i+1, ok, want)
		}
	}
}
