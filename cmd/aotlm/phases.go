package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/aotlm/aotlm/internal/score"
)

// runPhases scores text with each phase of a quantized model and prints
// the perplexities and the KL divergence and top-1 agreement of each
// phase against the first.
func runPhases(w io.Writer, o score.PhaseOptions, text string, opts score.TextOptions, asJSON bool) error {
	res, err := score.Phases(o, text, opts)
	if err != nil {
		return err
	}
	if asJSON {
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
			rows[i] = row{o.Phases[i], r.PPL, r.NLL, r.StdErr, r.KL, r.KLStdErr, r.MaxKL, r.Top1}
		}
		return json.NewEncoder(w).Encode(map[string]any{"phases": rows, "tokens": res[0].Tokens,
			"ctx": res[0].Ctx, "chunks": res[0].Chunks, "method": res[0].Method})
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "phase\tPPL\t+/-\tmean KL vs %s\t+/-\tmax KL\tsame top-1\n", o.Phases[0])
	for i, r := range res {
		fmt.Fprintf(tw, "%s\t%.4f\t%.5f\t%.6f\t%.6f\t%.4f\t%.2f%%\n", o.Phases[i], r.PPL, r.StdErr, r.KL, r.KLStdErr, r.MaxKL, 100*r.Top1)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d tokens scored; %s rule, %d chunks of %d tokens\n", res[0].Tokens, res[0].Method, res[0].Chunks, res[0].Ctx)
	return nil
}

// runLambadaPhases scores the first limit (0: all) LAMBADA-style items of
// data with each phase of a quantized model (eval --task lambada
// --phases) and prints each phase's accuracy and perplexities, and the KL
// divergence and top-1 agreement of its last-word distributions against
// the first phase's.
func runLambadaPhases(w io.Writer, data io.Reader, limit int, o score.PhaseOptions, asJSON bool) error {
	items, err := score.ReadLambada(data, limit)
	if err != nil {
		return err
	}
	res, err := score.LambadaPhases(o, items)
	if err != nil {
		return err
	}
	if asJSON {
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
			rows[i] = row{o.Phases[i], r.Acc, r.PPL, r.TokenPPL, r.KL, r.Top1}
		}
		return json.NewEncoder(w).Encode(map[string]any{"task": "lambada", "phases": rows, "items": res[0].Items, "tokens": res[0].Tokens})
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "phase\taccuracy\tPPL\tPPL per token\tmean KL vs %s\tsame top-1\n", o.Phases[0])
	for i, r := range res {
		fmt.Fprintf(tw, "%s\t%.2f%%\t%.4f\t%.4f\t%.6f\t%.2f%%\n", o.Phases[i], 100*r.Acc, r.PPL, r.TokenPPL, r.KL, 100*r.Top1)
	}
	tw.Flush()
	fmt.Fprintf(w, "lambada: %d passages, %d last-word tokens scored\n", res[0].Items, res[0].Tokens)
	return nil
}
