package score

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/aotlm/aotlm/internal/eval"
)

// PhasesJSON is the JSON object of Phases' results, res[i] the score of
// phases[i].
func PhasesJSON(phases []string, res []eval.PhaseResult) any {
	type row struct {
		Phase    string  `json:"phase"`
		PPL      float64 `json:"ppl"`
		NLL      float64 `json:"nll"`
		StdErr   float64 `json:"ppl_stderr"`
		KL       float64 `json:"kl"`
		KLStdErr float64 `json:"kl_stderr"`
		MaxKL    float64 `json:"max_kl"`
		Top1     float64 `json:"top1"`
	}
	rows := make([]row, len(res))
	for i, r := range res {
		rows[i] = row{phases[i], r.PPL, r.NLL, r.StdErr, r.KL, r.KLStdErr, r.MaxKL, r.Top1}
	}
	return map[string]any{"phases": rows, "tokens": res[0].Tokens, "ctx": res[0].Ctx, "chunks": res[0].Chunks, "method": res[0].Method}
}

// WritePhases prints Phases' results as a table, a phase a row, then
// what was scored.
func WritePhases(w io.Writer, phases []string, res []eval.PhaseResult) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "phase\tPPL\t+/-\tmean KL vs %s\t+/-\tmax KL\tsame top-1\n", phases[0])
	for i, r := range res {
		fmt.Fprintf(tw, "%s\t%.4f\t%.5f\t%.6f\t%.6f\t%.4f\t%.2f%%\n", phases[i], r.PPL, r.StdErr, r.KL, r.KLStdErr, r.MaxKL, 100*r.Top1)
	}
	tw.Flush()
	_, err := fmt.Fprintf(w, "%d tokens scored; %s rule, %d chunks of %d tokens\n", res[0].Tokens, res[0].Method, res[0].Chunks, res[0].Ctx)
	return err
}

// LambadaPhasesJSON is the JSON object of LambadaPhases' results, res[i]
// the score of phases[i].
func LambadaPhasesJSON(phases []string, res []eval.LambadaPhaseResult) any {
	type row struct {
		Phase    string  `json:"phase"`
		Acc      float64 `json:"acc"`
		PPL      float64 `json:"ppl"`
		TokenPPL float64 `json:"token_ppl"`
		KL       float64 `json:"kl"`
		Top1     float64 `json:"top1"`
	}
	rows := make([]row, len(res))
	for i, r := range res {
		rows[i] = row{phases[i], r.Acc, r.PPL, r.TokenPPL, r.KL, r.Top1}
	}
	return map[string]any{"task": "lambada", "phases": rows, "items": res[0].Items, "tokens": res[0].Tokens}
}

// WriteLambadaPhases prints LambadaPhases' results as a table, a phase a
// row, then what was scored.
func WriteLambadaPhases(w io.Writer, phases []string, res []eval.LambadaPhaseResult) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "phase\taccuracy\tPPL\tPPL per token\tmean KL vs %s\tsame top-1\n", phases[0])
	for i, r := range res {
		fmt.Fprintf(tw, "%s\t%.2f%%\t%.4f\t%.4f\t%.6f\t%.2f%%\n", phases[i], 100*r.Acc, r.PPL, r.TokenPPL, r.KL, 100*r.Top1)
	}
	tw.Flush()
	_, err := fmt.Fprintf(w, "lambada: %d passages, %d last-word tokens scored\n", res[0].Items, res[0].Tokens)
	return err
}

// TaskJSON is the JSON object of Task's result on the task.
func TaskJSON(task string, res TaskResult) any {
	if r := res.Lambada; r != nil {
		return map[string]any{"task": task, "items": r.Items, "acc": r.Acc, "ppl": r.PPL}
	}
	r := res.Choices
	preds := make([]int, len(r.Items))
	right := make([]bool, len(r.Items))
	for i, it := range r.Items {
		preds[i], right[i] = it.PredNorm, it.PredNorm == it.Gold
	}
	return map[string]any{"task": task, "tasks": r.Tasks, "acc": r.Acc, "acc_norm": r.AccNorm, "pred_norm": preds, "correct_norm": right}
}

// WriteTask prints Task's result on the task in one line.
func WriteTask(w io.Writer, task string, res TaskResult) error {
	if r := res.Lambada; r != nil {
		_, err := fmt.Fprintf(w, "lambada: %d passages, accuracy %.2f%%, perplexity %.3f\n", r.Items, 100*r.Acc, r.PPL)
		return err
	}
	r := res.Choices
	_, err := fmt.Fprintf(w, "%s: %d tasks, acc %.2f%% (summed log-likelihood), acc_norm %.2f%% (mean per token, as llama-perplexity)\n",
		task, r.Tasks, 100*r.Acc, 100*r.AccNorm)
	return err
}

// TextJSON is the JSON object of Text's result.
func TextJSON(r eval.Result) any {
	return map[string]any{"ppl": r.PPL, "nll": r.NLL, "tokens": r.Tokens, "ctx": r.Ctx, "chunks": r.Chunks, "method": r.Method}
}

// WriteText prints Text's result as llama-perplexity's final estimate;
// stride is the sliding window's (0: llama.cpp's chunks).
func WriteText(w io.Writer, r eval.Result, stride int) error {
	unit := "chunks"
	if stride > 0 {
		unit = fmt.Sprintf("windows (stride %d)", stride)
	}
	_, err := fmt.Fprintf(w, "Final estimate: PPL = %.4f +/- %.5f (mean NLL %.6f over %d tokens; %s rule, %d %s of %d tokens)\n",
		r.PPL, r.StdErr, r.NLL, r.Tokens, r.Method, r.Chunks, unit, r.Ctx)
	return err
}
