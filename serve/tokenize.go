package serve

import (
	"net/http"
)

type tokenizeRequest struct {
	Model      string `json:"model"`
	Content    string `json:"content"`
	AddSpecial bool   `json:"add_special"`
	WithPieces bool   `json:"with_pieces"`
}

type piece struct {
	ID    int    `json:"id"`
	Piece string `json:"piece"`
}

// handleTokenize answers POST /tokenize {"content": "..."} with
// {"tokens": [ids]} (or [{"id", "piece"}] with with_pieces).
func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) *apiError {
	var req tokenizeRequest
	if e := decodeBody(r, &req); e != nil {
		return e
	}
	if e := s.checkModel(req.Model); e != nil {
		return e
	}
	ids, err := s.m.Encode(req.Content, !req.AddSpecial)
	if err != nil {
		return badRequest("content", "%v", err)
	}
	if !req.WithPieces {
		writeJSON(w, http.StatusOK, map[string]any{"tokens": ids})
		return nil
	}
	tok := s.m.Tokenizer()
	ps := make([]piece, len(ids))
	for i, id := range ids {
		ps[i] = piece{id, tok.Decode([]int{id})}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": ps})
	return nil
}

type detokenizeRequest struct {
	Model  string `json:"model"`
	Tokens []int  `json:"tokens"`
}

// handleDetokenize answers POST /detokenize {"tokens": [ids]} with
// {"content": "..."}.
func (s *Server) handleDetokenize(w http.ResponseWriter, r *http.Request) *apiError {
	var req detokenizeRequest
	if e := decodeBody(r, &req); e != nil {
		return e
	}
	if e := s.checkModel(req.Model); e != nil {
		return e
	}
	tok := s.m.Tokenizer()
	if tok == nil {
		return badRequest("", "the model has no tokenizer")
	}
	for _, id := range req.Tokens {
		if id < 0 || id >= tok.VocabSize() {
			return badRequest("tokens", "token id %d is outside the vocabulary of %d", id, tok.VocabSize())
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"content": tok.Decode(req.Tokens)})
	return nil
}
