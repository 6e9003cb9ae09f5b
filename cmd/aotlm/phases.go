package main

import (
	"encoding/json"
	"io"

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
		return json.NewEncoder(w).Encode(score.PhasesJSON(o.Phases, res))
	}
	return score.WritePhases(w, o.Phases, res)
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
		return json.NewEncoder(w).Encode(score.LambadaPhasesJSON(o.Phases, res))
	}
	return score.WriteLambadaPhases(w, o.Phases, res)
}
