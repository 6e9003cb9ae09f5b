package serve

import "github.com/aotlm/aotlm"

// timings are the server's own measures of one generation, in
// llama-server's "timings" shape: the prompt tokens prefilled (those not
// taken from the cache) and the tokens generated, with their times.
type timings struct {
	CacheN             int     `json:"cache_n"`
	PromptN            int     `json:"prompt_n"`
	PromptMS           float64 `json:"prompt_ms"`
	PromptPerSecond    float64 `json:"prompt_per_second"`
	PredictedN         int     `json:"predicted_n"`
	PredictedMS        float64 `json:"predicted_ms"`
	PredictedPerSecond float64 `json:"predicted_per_second"`
	// DraftN and DraftNAccepted are the tokens speculative decoding
	// guessed and the model kept (absent without speculation).
	DraftN         int `json:"draft_n,omitempty"`
	DraftNAccepted int `json:"draft_n_accepted,omitempty"`
}

// timingsOf reads the timings of res; the generation rate counts the
// tokens after the first (the prefill's) over the decode passes' time.
func timingsOf(res *aotlm.Result) *timings {
	t := &timings{CacheN: res.Reused, PromptN: len(res.PromptIDs) - res.Reused, PromptMS: ms(res.Prefill.Seconds()),
		PredictedN: len(res.IDs), PredictedMS: ms(res.Decode.Seconds())}
	if s := res.Prefill.Seconds(); s > 0 {
		t.PromptPerSecond = float64(t.PromptN) / s
	}
	if s := res.Decode.Seconds(); s > 0 && t.PredictedN > 1 {
		t.PredictedPerSecond = float64(t.PredictedN-1) / s
	}
	if d := res.Decoding; d != nil {
		t.DraftN, t.DraftNAccepted = d.Drafted, d.Accepted
	}
	return t
}

func ms(s float64) float64 { return s * 1000 }
