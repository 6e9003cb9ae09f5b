package score

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/aotlm/aotlm/internal/eval"
)

func TestWritePhases(t *testing.T) {
	base := eval.Result{PPL: 10, NLL: 2.302585, StdErr: 0.5, Tokens: 256, Chunks: 2, Ctx: 128, Method: eval.LlamaCpp}
	q := base
	q.PPL = 10.5
	res := []eval.PhaseResult{{Result: base}, {Result: q, KL: 0.0125, KLStdErr: 0.001, MaxKL: 0.5, Top1: 0.9}}
	var b bytes.Buffer
	if err := WritePhases(&b, []string{"float", "qdq"}, res); err != nil {
		t.Fatal(err)
	}
	want := "phase  PPL      +/-      mean KL vs float  +/-       max KL  same top-1\n" +
		"float  10.0000  0.50000  0.000000          0.000000  0.0000  0.00%\n" +
		"qdq    10.5000  0.50000  0.012500          0.001000  0.5000  90.00%\n" +
		"256 tokens scored; llama.cpp rule, 2 chunks of 128 tokens\n"
	if b.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	j, err := json.Marshal(PhasesJSON([]string{"float", "qdq"}, res))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"chunks":2,"ctx":128,"method":"llama.cpp","phases":[{"phase":"float","ppl":10,"nll":2.302585,"ppl_stderr":0.5,"kl":0,"kl_stderr":0,"max_kl":0,"top1":0},` +
		`{"phase":"qdq","ppl":10.5,"nll":2.302585,"ppl_stderr":0.5,"kl":0.0125,"kl_stderr":0.001,"max_kl":0.5,"top1":0.9}],"tokens":256}`; string(j) != want {
		t.Fatalf("json:\n%s\nwant:\n%s", j, want)
	}
}

func TestWriteLambadaPhases(t *testing.T) {
	res := []eval.LambadaPhaseResult{
		{LambadaResult: eval.LambadaResult{Items: 3, Acc: 2.0 / 3, PPL: 4}, Tokens: 5, TokenPPL: 2},
		{LambadaResult: eval.LambadaResult{Items: 3, Acc: 1.0 / 3, PPL: 5}, Tokens: 5, TokenPPL: 2.5, KL: 0.25, Top1: 0.8},
	}
	var b bytes.Buffer
	if err := WriteLambadaPhases(&b, []string{"float", "artifact"}, res); err != nil {
		t.Fatal(err)
	}
	want := "phase     accuracy  PPL     PPL per token  mean KL vs float  same top-1\n" +
		"float     66.67%    4.0000  2.0000         0.000000          0.00%\n" +
		"artifact  33.33%    5.0000  2.5000         0.250000          80.00%\n" +
		"lambada: 3 passages, 5 last-word tokens scored\n"
	if b.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestWriteText(t *testing.T) {
	r := eval.Result{PPL: 5.8585, NLL: 1.7678, StdErr: 0.12, Tokens: 1024, Chunks: 8, Ctx: 128, Method: eval.LlamaCpp}
	var b bytes.Buffer
	if err := WriteText(&b, r, 0); err != nil {
		t.Fatal(err)
	}
	if want := "Final estimate: PPL = 5.8585 +/- 0.12000 (mean NLL 1.767800 over 1024 tokens; llama.cpp rule, 8 chunks of 128 tokens)\n"; b.String() != want {
		t.Fatalf("got  %q\nwant %q", b.String(), want)
	}
	b.Reset()
	r.Method = eval.Sliding
	if err := WriteText(&b, r, 64); err != nil {
		t.Fatal(err)
	}
	if want := "Final estimate: PPL = 5.8585 +/- 0.12000 (mean NLL 1.767800 over 1024 tokens; sliding rule, 8 windows (stride 64) of 128 tokens)\n"; b.String() != want {
		t.Fatalf("got  %q\nwant %q", b.String(), want)
	}
}

func TestWriteTask(t *testing.T) {
	var b bytes.Buffer
	lambada := TaskResult{Lambada: &eval.LambadaResult{Items: 500, Acc: 0.25, PPL: 40.5}}
	if err := WriteTask(&b, "lambada", lambada); err != nil || b.String() != "lambada: 500 passages, accuracy 25.00%, perplexity 40.500\n" {
		t.Fatalf("lambada: %q, %v", b.String(), err)
	}
	choices := TaskResult{Choices: &eval.MCResult{Tasks: 2, Acc: 0.5, AccNorm: 1,
		Items: []eval.MCItem{{Gold: 1, PredNorm: 1}, {Gold: 0, PredNorm: 2}}}}
	b.Reset()
	if err := WriteTask(&b, "hellaswag", choices); err != nil ||
		b.String() != "hellaswag: 2 tasks, acc 50.00% (summed log-likelihood), acc_norm 100.00% (mean per token, as llama-perplexity)\n" {
		t.Fatalf("hellaswag: %q, %v", b.String(), err)
	}
	j, err := json.Marshal(TaskJSON("hellaswag", choices))
	if want := `{"acc":0.5,"acc_norm":1,"correct_norm":[true,false],"pred_norm":[1,2],"task":"hellaswag","tasks":2}`; err != nil || string(j) != want {
		t.Fatalf("json %s, %v", j, err)
	}
}
