package serve

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/constrain"
)

const storyGrammar = `root ::= "The " animal " is " color ("." | " and " color ".")
animal ::= "cat" | "dog" | [a-z]{2,6}
color ::= "red" | "blue" | [0-9]+ # a number will do
`

// storyGrammarRE recognizes storyGrammar's language independently.
var storyGrammarRE = regexp.MustCompile(`^The (cat|dog|[a-z]{2,6}) is (red|blue|[0-9]+)(\.| and (red|blue|[0-9]+)\.)$`)

// isPrefix reports whether text can start a string of g.
func isPrefix(t *testing.T, g *constrain.Grammar, text string) bool {
	t.Helper()
	return constrain.NewGrammarRecognizer(g).Feed([]byte(text))
}

// TestGrammarChat: with a GBNF grammar, the story model's sampled chat
// replies are in the grammar's language whenever they finish with
// "stop"; a reply cut by a small max_tokens finishes with "length" and
// is a prefix of one, and a max_tokens too small for any reply is a 400.
func TestGrammarChat(t *testing.T) {
	ts := newTestServer(t, Options{})
	g, err := constrain.ParseGBNF(storyGrammar)
	if err != nil {
		t.Fatal(err)
	}
	stops := 0
	for seed := 1; seed <= 6; seed++ {
		maxTok := 60
		switch seed {
		case 3:
			maxTok = 4 // too few tokens for any reply: refused
		case 4:
			maxTok = ts.srv.grammarMask(g, 0, nil).MinBudget() // just enough to start
		}
		body := map[string]any{"messages": []map[string]string{{"role": "user", "content": "Tell me a story."}},
			"grammar": storyGrammar, "temperature": 1, "seed": seed, "max_tokens": maxTok}
		if seed == 3 {
			if status, out := rawPost(t, ts, "/v1/chat/completions", body); status != http.StatusBadRequest || !needRE.MatchString(fmt.Sprint(out)) {
				t.Errorf("max_tokens 4: %d %v, want a 400 naming the minimum", status, out)
			}
			continue
		}
		var out chatResponse
		if resp := postJSON(t, ts, "/v1/chat/completions", body, &out); resp.StatusCode != http.StatusOK {
			t.Fatalf("seed %d: status %d", seed, resp.StatusCode)
		}
		if len(out.Choices) != 1 || out.Choices[0].Message == nil || out.Choices[0].FinishReason == nil {
			t.Fatalf("seed %d: answer without a choice: %+v", seed, out)
		}
		text, finish := "", *out.Choices[0].FinishReason
		if c := out.Choices[0].Message.Content; c != nil {
			text = *c
		}
		t.Logf("seed %d (max %d): %q %s", seed, maxTok, text, finish)
		switch {
		case finish == "stop":
			stops++
			if !storyGrammarRE.MatchString(text) {
				t.Errorf("seed %d: reply %q finished with stop but is not in the grammar", seed, text)
			}
		case finish == "length":
			if !isPrefix(t, g, text) {
				t.Errorf("seed %d: reply %q cut by the limit does not start a string of the grammar", seed, text)
			}
			if maxTok >= 40 {
				t.Errorf("seed %d: %d tokens left no room for a reply %q", seed, maxTok, text)
			}
		default:
			t.Errorf("seed %d: finish_reason %q", seed, finish)
		}
	}
	if stops == 0 {
		t.Error("no reply finished")
	}
}

// TestRegexCompletions: /v1/completions with a regex, two choices a
// request: each choice's text matches the expression as a whole.
func TestRegexCompletions(t *testing.T) {
	ts := newTestServer(t, Options{})
	expr := `[A-Z][a-z]+( [a-z]{1,8}){2,4}[.!]`
	re := regexp.MustCompile(`^(?:` + expr + `)$`)
	for seed := 1; seed <= 3; seed++ {
		body := map[string]any{"prompt": "Once upon a time", "regex": expr, "temperature": 1, "seed": seed, "max_tokens": 48, "n": 2}
		var out completionResponse
		if resp := postJSON(t, ts, "/v1/completions", body, &out); resp.StatusCode != http.StatusOK {
			t.Fatalf("seed %d: status %d", seed, resp.StatusCode)
		}
		if len(out.Choices) != 2 {
			t.Fatalf("seed %d: %d choices, want 2", seed, len(out.Choices))
		}
		for _, c := range out.Choices {
			t.Logf("seed %d choice %d: %q %s", seed, c.Index, c.Text, *c.FinishReason)
			if *c.FinishReason != "stop" || !re.MatchString(c.Text) {
				t.Errorf("seed %d choice %d: %q (%s) does not match %s", seed, c.Index, c.Text, *c.FinishReason, expr)
			}
		}
	}
}

// TestGrammarRefused: a grammar or regex that does not compile, or a
// request with two constraints, is a 400 naming the problem.
func TestGrammarRefused(t *testing.T) {
	ts := newTestServer(t, Options{})
	chat := `{"messages": [{"role": "user", "content": "hi"}], %s}`
	cases := []struct{ path, body, says string }{
		{"/v1/chat/completions", fmt.Sprintf(chat, `"grammar": "root ::= \"a\" | x"`), "line 1, column 16: rule x is not defined"},
		{"/v1/chat/completions", fmt.Sprintf(chat, `"grammar": "root ::= root \"a\" | \"b\""`), "rule root is left-recursive"},
		{"/v1/completions", `{"prompt": "a", "grammar": "start ::= \"a\""}`, "no root rule"},
		{"/v1/completions", `{"prompt": "a", "regex": "a("}`, "regex"},
		{"/v1/completions", `{"prompt": "a", "regex": "a", "grammar": "root ::= \"a\""}`, "send one of them"},
		{"/v1/completions", `{"prompt": "a", "regex": "a", "ignore_eos": true}`, "ignore_eos"},
		{"/v1/chat/completions", fmt.Sprintf(chat, `"regex": "a", "response_format": {"type": "json_object"}`), "send one of them"},
	}
	for _, c := range cases {
		status, msg, _ := post(t, ts, c.path, c.body, nil)
		if status != http.StatusBadRequest || !strings.Contains(msg, c.says) {
			t.Errorf("%s %s: status %d %q, want 400 saying %q", c.path, c.body, status, msg, c.says)
		}
	}
}

// TestRegexCompletionsStream: streamed, each of two choices gets its
// own mask, and the text of each matches the expression.
func TestRegexCompletionsStream(t *testing.T) {
	ts := newTestServer(t, Options{})
	expr := `(yes|no|maybe)( [a-z]{2,5}){1,3}\.`
	re := regexp.MustCompile(`^(?:` + expr + `)$`)
	body := `{"prompt": "Once upon a time", "regex": ` + strconv.Quote(expr) + `, "temperature": 1, "seed": 7, "max_tokens": 40, "n": 2, "stream": true}`
	resp, err := http.Post(ts.http.URL+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, finish := map[int]string{}, map[int]string{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c completionResponse
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		for _, ch := range c.Choices {
			text[ch.Index] += ch.Text
			if ch.FinishReason != nil {
				finish[ch.Index] = *ch.FinishReason
			}
		}
	}
	for i := range 2 {
		t.Logf("choice %d: %q %s", i, text[i], finish[i])
		if finish[i] != "stop" || !re.MatchString(text[i]) {
			t.Errorf("choice %d: %q (%q) does not match %s", i, text[i], finish[i], expr)
		}
	}
}
