package serve

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/aotlm/aotlm"
)

// This file serves embeddings: OpenAI's /v1/embeddings and Ollama's
// /api/embed and /api/embeddings, over Session.Embed with the pooling the
// model was compiled with.

// maxEmbedInputs bounds the inputs of one embeddings request.
const maxEmbedInputs = 256

// embedInput is the input of an embeddings request: a string, an array
// of strings, an array of token ids, or an array of arrays of token ids.
type embedInput struct {
	Texts []string
	IDs   [][]int
	Set   bool
}

func (in *embedInput) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if string(data) == "null" {
		return nil
	}
	in.Set = true
	if len(data) > 0 && data[0] == '"' {
		in.Texts = []string{""}
		return json.Unmarshal(data, &in.Texts[0])
	}
	bad := &fieldError{"input", "want a string, an array of strings, an array of token ids or an array of such arrays"}
	var items []json.RawMessage
	if json.Unmarshal(data, &items) != nil {
		return bad
	}
	if len(items) == 0 {
		return nil
	}
	var err error
	switch items[0][0] {
	case '"':
		err = json.Unmarshal(data, &in.Texts)
	case '[':
		err = json.Unmarshal(data, &in.IDs)
	default:
		var ids []int
		err = json.Unmarshal(data, &ids)
		in.IDs = [][]int{ids}
	}
	if err != nil {
		in.Texts, in.IDs = nil, nil
		return bad
	}
	return nil
}

// count is the number of inputs.
func (in *embedInput) count() int { return len(in.Texts) + len(in.IDs) }

// embedJob is what an embeddings request asks, whatever its API.
type embedJob struct {
	in         embedInput
	dimensions int  // keep the first n values (then normalize again); 0 all
	truncate   bool // cut an input longer than the context instead of refusing it
	param      string
}

// embedResult is the vectors of a job and the tokens they took.
type embedResult struct {
	vecs   [][]float32
	tokens int
}

// embed tokenizes the job's inputs and embeds each on one session.
func (s *Server) embed(ctx context.Context, j embedJob) (*embedResult, *apiError) {
	if !s.m.CanEmbed() || s.m.Pooling() == "" {
		return nil, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "model_not_supported",
			Message: "the model " + jsonQuote(s.id) + " is not an embedding model (compile it with aotlm compile --pooling mean, cls or last)"}
	}
	n := j.in.count()
	switch {
	case !j.in.Set:
		return nil, badRequest(j.param, "%s is missing", j.param)
	case n == 0:
		return nil, badRequest(j.param, "%s is an empty array", j.param)
	case n > maxEmbedInputs:
		return nil, badRequest(j.param, "%d inputs: at most %d a request", n, maxEmbedInputs)
	}
	if j.dimensions < 0 {
		return nil, badRequest("dimensions", "dimensions is %d: want a positive number", j.dimensions)
	}
	seqs := make([][]int, 0, n)
	for i, t := range j.in.Texts {
		ids, err := s.m.Encode(t, false)
		if err != nil {
			return nil, badRequest(j.param, "%s[%d]: %v", j.param, i, err)
		}
		seqs = append(seqs, ids)
	}
	vocab := s.m.Info().Vocab
	for i, ids := range j.in.IDs {
		for _, id := range ids {
			if id < 0 || id >= vocab {
				return nil, badRequest(j.param, "%s[%d]: token id %d is outside the vocabulary of %d", j.param, i, id, vocab)
			}
		}
		seqs = append(seqs, ids)
	}
	res := &embedResult{}
	for i, ids := range seqs {
		if len(ids) == 0 {
			return nil, badRequest(j.param, "%s[%d] is empty", j.param, i)
		}
		if len(ids) > s.ctx {
			if !j.truncate {
				return nil, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "context_length_exceeded", Param: j.param,
					Message: fmt.Sprintf("%s[%d] is %d tokens; the context holds %d", j.param, i, len(ids), s.ctx)}
			}
			seqs[i] = ids[:s.ctx]
		}
		res.tokens += len(seqs[i])
	}
	sl, e := s.acquire(ctx, nil, "")
	if e != nil {
		return nil, e
	}
	defer s.pool.release(sl)
	s.metrics.active.Add(1)
	defer s.metrics.active.Add(-1)
	for _, ids := range seqs {
		v, err := sl.s.Embed(ctx, ids, aotlm.EmbedOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return nil, &apiError{Status: 499, Type: "invalid_request_error", Code: "client_closed", Message: "the client went away"}
			}
			return nil, &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()}
		}
		if d := j.dimensions; d > 0 && d < len(v) {
			v = renormalized(v[:d])
		}
		res.vecs = append(res.vecs, v)
	}
	return res, nil
}

// renormalized scales v to a Euclidean norm of 1 (a truncated
// Matryoshka embedding).
func renormalized(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	if n == 0 {
		return out
	}
	k := 1 / math.Sqrt(n)
	for i, x := range v {
		out[i] = float32(float64(x) * k)
	}
	return out
}

type embeddingsRequest struct {
	Model          string     `json:"model"`
	Input          embedInput `json:"input"`
	EncodingFormat string     `json:"encoding_format"`
	Dimensions     int        `json:"dimensions"`
	User           string     `json:"user"`
}

type embeddingItem struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or a base64 string
}

// handleEmbeddings answers POST /v1/embeddings: one embedding per input,
// as floats or (encoding_format base64) the base64 of their
// little-endian float32 bytes.
func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) *apiError {
	var req embeddingsRequest
	if e := decodeBody(r, &req); e != nil {
		return e
	}
	if e := s.checkModel(req.Model); e != nil {
		return e
	}
	switch req.EncodingFormat {
	case "", "float", "base64":
	default:
		return badRequest("encoding_format", "encoding_format %q: want float or base64", req.EncodingFormat)
	}
	res, e := s.embed(r.Context(), embedJob{in: req.Input, dimensions: req.Dimensions, param: "input"})
	if e != nil {
		return e
	}
	data := make([]embeddingItem, len(res.vecs))
	for i, v := range res.vecs {
		data[i] = embeddingItem{Object: "embedding", Index: i, Embedding: v}
		if req.EncodingFormat == "base64" {
			b := make([]byte, 4*len(v))
			for k, x := range v {
				binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(x))
			}
			data[i].Embedding = base64.StdEncoding.EncodeToString(b)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "model": s.id,
		"usage": map[string]int{"prompt_tokens": res.tokens, "total_tokens": res.tokens}})
	return nil
}

type ollamaEmbedRequest struct {
	Model      string          `json:"model"`
	Input      embedInput      `json:"input"`
	Prompt     *string         `json:"prompt"` // /api/embeddings
	Truncate   *bool           `json:"truncate"`
	Dimensions int             `json:"dimensions"`
	Options    json.RawMessage `json:"options"`
	KeepAlive  json.RawMessage `json:"keep_alive"`
}

// handleOllamaEmbed answers Ollama's POST /api/embed: {"embeddings":
// [[...], ...]} for a string or an array of strings, inputs longer than
// the context cut to it unless "truncate": false.
func (s *Server) handleOllamaEmbed(w http.ResponseWriter, r *http.Request) *apiError {
	start := time.Now()
	var req ollamaEmbedRequest
	if e := decodeBody(r, &req); e != nil {
		return e
	}
	if e := s.checkModel(strings.TrimSuffix(req.Model, ":latest")); e != nil {
		return e
	}
	res, e := s.embed(r.Context(), embedJob{in: req.Input, dimensions: req.Dimensions, truncate: req.Truncate == nil || *req.Truncate, param: "input"})
	if e != nil {
		return e
	}
	d := time.Since(start).Nanoseconds()
	writeJSON(w, http.StatusOK, map[string]any{"model": cmp.Or(req.Model, s.id), "embeddings": res.vecs,
		"total_duration": d, "load_duration": 0, "prompt_eval_count": res.tokens})
	return nil
}

// handleOllamaEmbeddings answers Ollama's older POST /api/embeddings:
// {"embedding": [...]} for "prompt".
func (s *Server) handleOllamaEmbeddings(w http.ResponseWriter, r *http.Request) *apiError {
	var req ollamaEmbedRequest
	if e := decodeBody(r, &req); e != nil {
		return e
	}
	if e := s.checkModel(strings.TrimSuffix(req.Model, ":latest")); e != nil {
		return e
	}
	if req.Prompt == nil {
		return badRequest("prompt", "prompt is missing")
	}
	in := embedInput{Texts: []string{*req.Prompt}, Set: true}
	res, e := s.embed(r.Context(), embedJob{in: in, truncate: true, param: "prompt"})
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, map[string]any{"embedding": res.vecs[0]})
	return nil
}
