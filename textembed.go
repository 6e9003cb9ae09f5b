package aotlm

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/plan"
)

// Pooling methods of Session.Embed: the mean of the sequence's final
// hidden rows, its first row (a class token's), or its last (the
// end-of-text token's, as Qwen3's embedding models are trained).
const (
	PoolMean = plan.PoolMean
	PoolCLS  = plan.PoolCLS
	PoolLast = plan.PoolLast
)

// PoolRank is the pooling Model.Pooling reports for a reranker: a model
// that scores a query and a document by its logits of "yes" and "no" at
// the end of a prompt asking whether the document meets the query
// (Qwen3-Reranker), with no embeddings.
const PoolRank = plan.PoolRank

// ErrNoEmbeddings is returned by Embed on a model whose artifact keeps no
// hidden rows: one compiled without a pooling.
var ErrNoEmbeddings = errors.New("the model gives no embeddings (compile it with a pooling, aotlm compile --pooling)")

// ErrEmbeddingsOnly is returned by Generate on a text encoder's model
// (bidirectional attention, such as EmbeddingGemma): it gives embeddings
// only.
var ErrEmbeddingsOnly = errors.New("the model is a text encoder (bidirectional attention): it gives embeddings only, not generation")

// EmbedOptions tune Session.Embed.
type EmbedOptions struct {
	// Pooling is PoolMean, PoolCLS or PoolLast; "" is the model's
	// (Model.Pooling).
	Pooling string
	// Raw returns the pooled vector as it is; by default it is scaled to
	// a Euclidean norm of 1.
	Raw bool
}

// hiddenSequence is a sequence that gives its final hidden rows.
type hiddenSequence interface {
	PrefillHidden(ctx context.Context, ids []int, fn func(pos int, row []float32) error) error
}

// Pooling is the pooling an embedding model was compiled with (PoolMean,
// PoolCLS or PoolLast), PoolRank for a reranker, "" for a generative
// model.
func (m *Model) Pooling() string {
	if m.eng == nil {
		return ""
	}
	if e := m.eng.Manifest().Embedding; e != nil {
		return e.Pooling
	}
	return ""
}

// CanEmbed reports whether Session.Embed runs on the model: its artifact
// keeps the final hidden rows (an embedding model's, or a model's with a
// draft head).
func (m *Model) CanEmbed() bool { return m.eng != nil && m.eng.HiddenWidth() > 0 }

// Embed feeds ids to the emptied session and returns their embedding: the
// final hidden rows (after the last norm) pooled as opts say. The session
// then holds ids. Bad options, an empty sequence or a model without
// hidden rows give an error.
func (s *Session) Embed(ctx context.Context, ids []int, opts EmbedOptions) ([]float32, error) {
	pool := opts.Pooling
	if pool == "" {
		pool = s.m.Pooling()
	}
	if pool == "" {
		return nil, fmt.Errorf("embed: the model declares no pooling: choose %s, %s or %s", PoolMean, PoolCLS, PoolLast)
	}
	if !plan.ValidPooling(pool) {
		return nil, fmt.Errorf("embed: pooling %q: want %s, %s or %s", pool, PoolMean, PoolCLS, PoolLast)
	}
	hs, ok := s.seq.(hiddenSequence)
	if !ok || !s.m.CanEmbed() {
		return nil, ErrNoEmbeddings
	}
	if len(ids) == 0 {
		return nil, errors.New("embed: no tokens")
	}
	if len(ids) > s.seq.Context() {
		return nil, fmt.Errorf("embed: %d tokens, more than the session's context of %d", len(ids), s.seq.Context())
	}
	if err := s.Reset(); err != nil {
		return nil, err
	}
	var sum []float64
	err := hs.PrefillHidden(ctx, ids, func(pos int, row []float32) error {
		if sum == nil {
			sum = make([]float64, len(row))
		}
		switch {
		case pool == PoolMean:
			for i, v := range row {
				sum[i] += float64(v)
			}
		case pool == PoolCLS && pos == 0, pool == PoolLast && pos == len(ids)-1:
			for i, v := range row {
				sum[i] = float64(v)
			}
		}
		return nil
	})
	if err != nil {
		_ = s.Reset()
		if errors.Is(err, engine.ErrNoHidden) {
			return nil, ErrNoEmbeddings
		}
		return nil, fmt.Errorf("embed: %w", err)
	}
	s.hist = append(s.hist[:0], ids...)
	if pool == PoolMean {
		for i := range sum {
			sum[i] /= float64(len(ids))
		}
	}
	scale := 1.0
	if !opts.Raw {
		var n float64
		for _, v := range sum {
			n += v * v
		}
		if n > 0 {
			scale = 1 / math.Sqrt(n)
		}
	}
	out := make([]float32, len(sum))
	for i, v := range sum {
		out[i] = float32(v * scale)
	}
	return out, nil
}
