package serve

import (
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
