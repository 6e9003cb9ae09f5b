package serve

import (
	"net/http"
	"testing"
)

// TestContextShiftUsage: on 48-position sessions, a completion asking
// for more tokens than the context holds is refused unless it sets
// context_shift (or the server's ContextShift is on); with it, all the
// tokens come, and usage tells the shifts and the tokens they dropped;
// n_keep out of range is refused naming it.
func TestContextShiftUsage(t *testing.T) {
	type shiftUsage struct {
		Shifts        int `json:"shifts"`
		DroppedTokens int `json:"dropped_tokens"`
	}
	type reply struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int         `json:"completion_tokens"`
			ContextShift     *shiftUsage `json:"context_shift"`
		} `json:"usage"`
		Error *struct {
			Param string `json:"param"`
		} `json:"error"`
	}
	body := func(extra map[string]any) map[string]any {
		b := map[string]any{"prompt": "Once upon a time", "max_tokens": 100, "temperature": 0, "ignore_eos": true}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	for _, serverDefault := range []bool{false, true} {
		ts := newTestServer(t, Options{Context: 48, ContextShift: serverDefault})
		var r reply
		resp := postJSON(t, ts, "/v1/completions", body(nil), &r)
		if !serverDefault {
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("100 tokens on 48 positions without a shift: status %d, want 400", resp.StatusCode)
			}
			r = reply{}
			resp = postJSON(t, ts, "/v1/completions", body(map[string]any{"context_shift": true, "n_keep": 2}), &r)
		}
		if resp.StatusCode != http.StatusOK || len(r.Choices) != 1 {
			t.Fatalf("server default %v: status %d, %+v", serverDefault, resp.StatusCode, r)
		}
		cs := r.Usage.ContextShift
		if r.Usage.CompletionTokens != 100 || r.Choices[0].FinishReason != "length" || cs == nil || cs.Shifts < 2 || cs.DroppedTokens < 2*cs.Shifts {
			t.Errorf("server default %v: %d tokens, finish %q, context_shift %+v; want 100, length, at least 2 shifts", serverDefault,
				r.Usage.CompletionTokens, r.Choices[0].FinishReason, cs)
		}
		r = reply{}
		resp = postJSON(t, ts, "/v1/completions", body(map[string]any{"context_shift": true, "n_keep": 48}), &r)
		if resp.StatusCode != http.StatusBadRequest || r.Error == nil || r.Error.Param != "n_keep" {
			t.Errorf("n_keep 48 of 48: status %d, %+v; want 400 naming n_keep", resp.StatusCode, r.Error)
		}
		if serverDefault {
			r = reply{}
			resp = postJSON(t, ts, "/v1/completions", body(map[string]any{"context_shift": false}), &r)
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("context_shift false on a shifting server: status %d, want 400 (100 tokens do not fit)", resp.StatusCode)
			}
		}
	}
}
