package serve

import (
	"fmt"
	"net/http"

	"github.com/aotlm/aotlm/internal/constrain"
)

// outputGrammar compiles the request's grammar (GBNF, llama-server's
// field) or regex into the grammar the reply is kept to; nil when the
// request has neither. A grammar that does not compile is a 400 with
// the parser's message.
func (s *Server) outputGrammar(g *genFields) (*constrain.Grammar, *apiError) {
	if g.Grammar == "" && g.Regex == "" {
		return nil, nil
	}
	if g.Grammar != "" && g.Regex != "" {
		return nil, badRequest("grammar", "grammar and regex both constrain the reply: send one of them")
	}
	var out *constrain.Grammar
	e := s.work("compiling the output grammar", func() *apiError {
		s.warmVocab()
		var err error
		if g.Grammar != "" {
			if out, err = constrain.ParseGBNF(g.Grammar); err != nil {
				return badRequest("grammar", "%v", err)
			}
			return nil
		}
		if out, err = constrain.CompileRegex(g.Regex); err != nil {
			return badRequest("regex", "%v", err)
		}
		return nil
	})
	if e != nil {
		return nil, e
	}
	return out, nil
}

// grammarMask makes the logits mask that keeps one generation to g.
func (s *Server) grammarMask(g *constrain.Grammar, budget int, stop []int) *constrain.Mask {
	return s.maskFor(constrain.NewGrammarRecognizer(g), budget, stop)
}

// grammarName says what the request's grammar or regex keeps the reply
// to, for errors.
func grammarName(g *genFields) string {
	if g.Regex != "" {
		return "the regex"
	}
	return "the grammar"
}

// checkRoom refuses a constrained request whose token limit cannot hold
// a reply the constraint accepts: m is the reply's mask, before any
// token; limit the request's limit (0: none, and budget is what the
// context leaves after the prompt); field the limit's name in the
// request; what the constraint ("the schema"). The minimum is
// constrain.Mask.MinBudget: the fewest whole tokens of a complete reply,
// with which the mask keeps the reply complete. It is searched for only
// when the budget is below the byte count (Mask.ByteBudget), so a request
// with room pays nothing for it.
func (s *Server) checkRoom(m *constrain.Mask, limit, budget int, field, what string) *apiError {
	if up := m.ByteBudget(); up >= 0 && budget >= up {
		return nil // room by the byte count: no search needed
	}
	need := m.MinBudget()
	if need < 0 || budget >= need { // need < 0: the tokens cannot start one
		return nil
	}
	if limit > 0 {
		return badRequest(field, "%s %d cannot fit a reply matching %s: it needs at least %d tokens", field, limit, what, need)
	}
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "context_length_exceeded",
		Message: fmt.Sprintf("the context leaves %d tokens after the prompt, too few for a reply matching %s: it needs at least %d tokens", budget, what, need)}
}
