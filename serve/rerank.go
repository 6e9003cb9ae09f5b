package serve

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"

	"github.com/aotlm/aotlm"
)

// This file serves /v1/rerank (also /rerank and /v1/reranking, as
// llama-server names it) over a reranker: a model compiled with pooling
// "rank" that answers, for a query and a document, whether the document
// meets the query with "yes" or "no" (Qwen3-Reranker); the score is the
// probability of yes against no.

// rerankInstruction is Qwen3-Reranker's default task instruction.
const rerankInstruction = "Given a web search query, retrieve relevant passages that answer the query"

// rerankPrompt is Qwen3-Reranker's prompt for a query and a document,
// with the empty thinking its chat template writes before the answer.
func rerankPrompt(instruction, query, doc string) string {
	return "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct provided. " +
		"Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n" +
		"<Instruct>: " + instruction + "\n<Query>: " + query + "\n<Document>: " + doc +
		"<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
}

// maxRerankDocuments bounds the documents of one request.
const maxRerankDocuments = 256

type rerankRequest struct {
	Model           string   `json:"model"`
	Query           *string  `json:"query"`
	Documents       []string `json:"documents"`
	TopN            *int     `json:"top_n"`
	ReturnDocuments bool     `json:"return_documents"`
	Instruction     string   `json:"instruction"`
}

type rerankResult struct {
	Index          int                `json:"index"`
	RelevanceScore float64            `json:"relevance_score"`
	Document       *map[string]string `json:"document,omitempty"`
}

// answerID is the id of the first token of word, the token a reranker's
// answer starts with.
func (s *Server) answerID(word string) (int, error) {
	ids, err := s.m.Encode(word, true)
	if err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, fmt.Errorf("%q encodes to no token", word)
	}
	return ids[0], nil
}

// rankScore is the reranker's score of a prompt: the probability of the
// token yes against the token no after it (the softmax of their two
// logits, as llama.cpp's rank pooling of a Qwen3 reranker computes it
// from the classifier's yes and no rows).
func (s *Server) rankScore(ctx context.Context, sl *slot, ids []int, yes, no int) (float64, error) {
	var logit float64
	seen := false
	_, err := s.run(ctx, sl, job{ids: ids, req: aotlm.Request{IDs: ids, MaxTokens: 1, IgnoreEOS: true,
		Logits: func(l []float32, generated []int) {
			if len(generated) == 0 {
				logit, seen = float64(l[yes])-float64(l[no]), true
			}
		}}}, nil)
	if err != nil {
		return 0, err
	}
	if !seen {
		return 0, errors.New("the reranker gave no logits")
	}
	return 1 / (1 + math.Exp(-logit)), nil
}

// handleRerank answers POST /v1/rerank: each document's relevance to the
// query, best first, cut to top_n.
func (s *Server) handleRerank(w http.ResponseWriter, r *http.Request) *apiError {
	var req rerankRequest
	if e := decodeBody(r, &req); e != nil {
		return e
	}
	if e := s.checkModel(req.Model); e != nil {
		return e
	}
	if s.m.Pooling() != aotlm.PoolRank {
		return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "model_not_supported",
			Message: "the model " + jsonQuote(s.id) + " is not a reranker (compile it with aotlm compile --pooling rank)"}
	}
	switch {
	case req.Query == nil:
		return badRequest("query", "query is missing")
	case len(req.Documents) == 0:
		return badRequest("documents", "documents is missing or empty")
	case len(req.Documents) > maxRerankDocuments:
		return badRequest("documents", "%d documents: at most %d a request", len(req.Documents), maxRerankDocuments)
	case req.TopN != nil && *req.TopN < 1:
		return badRequest("top_n", "top_n is %d: want a positive number", *req.TopN)
	}
	instruction := req.Instruction
	if instruction == "" {
		instruction = rerankInstruction
	}
	yes, err := s.answerID("yes")
	if err != nil {
		return badRequest("", "the model's tokenizer: %v", err)
	}
	no, err := s.answerID("no")
	if err != nil {
		return badRequest("", "the model's tokenizer: %v", err)
	}
	prompts := make([][]int, len(req.Documents))
	tokens := 0
	for i, d := range req.Documents {
		ids, err := s.m.Encode(rerankPrompt(instruction, *req.Query, d), true)
		if err != nil {
			return badRequest("documents", "documents[%d]: %v", i, err)
		}
		if e := s.checkPrompt(ids, 1, nil); e != nil {
			e.Param = "documents"
			e.Message = fmt.Sprintf("documents[%d]: %s", i, e.Message)
			return e
		}
		prompts[i], tokens = ids, tokens+len(ids)
	}
	sl, e := s.acquire(r.Context(), prompts[0], "")
	if e != nil {
		return e
	}
	defer s.pool.release(sl)
	results := make([]rerankResult, len(prompts))
	for i, ids := range prompts {
		// the documents share the prompt's head (instruction and query):
		// each takes it from the session's cache
		score, err := s.rankScore(r.Context(), sl, ids, yes, no)
		if err != nil {
			return generationError(err)
		}
		results[i] = rerankResult{Index: i, RelevanceScore: score}
		if req.ReturnDocuments {
			results[i].Document = &map[string]string{"text": req.Documents[i]}
		}
	}
	sort.SliceStable(results, func(a, b int) bool { return results[a].RelevanceScore > results[b].RelevanceScore })
	if req.TopN != nil && *req.TopN < len(results) {
		results = results[:*req.TopN]
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "model": s.id, "results": results,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens}})
	return nil
}
