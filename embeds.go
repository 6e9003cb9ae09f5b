package aotlm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/aotlm/aotlm/internal/engine"
)

// EmbedBase is the first of the prompt ids that are not tokens: an id
// from EmbedBase on names one embedding row held by Request.Embeds, which
// the model reads in place of a token's embedding (the rows of an encoded
// image, for a vision-language model). Such ids come from Embeds.Add.
const EmbedBase = 1 << (strconv.IntSize - 2)

// embedRowBits is how many low bits of an embedding id count the rows of
// one block; the bits above them come from the block's key.
const embedRowBits = 20

// IsEmbedID reports whether a prompt id names an embedding row.
func IsEmbedID(id int) bool { return id >= EmbedBase }

// Embeds holds blocks of embedding rows that prompt ids name. The ids of
// a block depend only on its key (a digest of what the rows encode, such
// as an image file's bytes), so a session whose cache holds a prompt with
// the same block reuses its cache past it, and a prompt with another
// block in its place is prefilled again from there. It is not safe for
// concurrent use.
type Embeds struct {
	width int
	rows  map[int][]float32 // the first id of a block -> its rows
	keys  map[int][32]byte  // the first id of a block -> its key
}

// NewEmbeds makes an empty set of rows of width values each (the text
// model's embedding width).
func NewEmbeds(width int) *Embeds {
	return &Embeds{width: width, rows: map[int][]float32{}, keys: map[int][32]byte{}}
}

// Width is the number of values of a row.
func (e *Embeds) Width() int { return e.width }

// Add holds a block of rows (whole rows of the width) under key and
// returns the prompt ids naming them, one per row in order.
func (e *Embeds) Add(key [32]byte, rows []float32) ([]int, error) {
	if e.width <= 0 || len(rows) == 0 || len(rows)%e.width != 0 {
		return nil, fmt.Errorf("embedding rows of %d values are not whole rows of %d", len(rows), e.width)
	}
	n := len(rows) / e.width
	if n >= 1<<embedRowBits {
		return nil, fmt.Errorf("a block of %d embedding rows: at most %d", n, 1<<embedRowBits-1)
	}
	hashBits := strconv.IntSize - 2 - embedRowBits
	h := binary.LittleEndian.Uint64(key[:8]) & (1<<hashBits - 1)
	first := EmbedBase + int(h)<<embedRowBits
	if k, ok := e.keys[first]; ok && k != key {
		return nil, errors.New("two blocks of embedding rows share their ids (a key clash)")
	}
	e.keys[first] = key
	e.rows[first] = rows
	ids := make([]int, n)
	for i := range ids {
		ids[i] = first + i
	}
	return ids, nil
}

// Row returns the row an id names, or nil when e holds none.
func (e *Embeds) Row(id int) []float32 {
	if e == nil || !IsEmbedID(id) {
		return nil
	}
	i := (id - EmbedBase) & (1<<embedRowBits - 1)
	block, ok := e.rows[id-i]
	if !ok || (i+1)*e.width > len(block) {
		return nil
	}
	return block[i*e.width : (i+1)*e.width]
}

// EmbedSequence is a Sequence that also reads embedding rows: a prompt id
// -1 takes the next row of embeds (one row of the model's width per id,
// zero for token rows) in place of a token's embedding. A session prefills
// prompts holding embedding ids through it; the engine's sessions are
// served without it.
type EmbedSequence interface {
	PrefillEmbeds(ctx context.Context, ids []int, embeds []float32) ([]float32, error)
}

// prefillIDs feeds ids to the session's sequence, placing the rows that
// embedding ids name.
func (s *Session) prefillIDs(ctx context.Context, ids []int, emb *Embeds) ([]float32, error) {
	n := 0
	for _, id := range ids {
		if IsEmbedID(id) {
			n++
		}
	}
	if n == 0 {
		return s.seq.PrefillContext(ctx, ids)
	}
	if emb == nil {
		return nil, errors.New("the prompt names embedding rows and the request holds none")
	}
	w := emb.Width()
	plain := make([]int, len(ids))
	rows := make([]float32, len(ids)*w)
	for i, id := range ids {
		plain[i] = id
		if !IsEmbedID(id) {
			continue
		}
		r := emb.Row(id)
		if r == nil {
			return nil, fmt.Errorf("prompt id %d at %d names an embedding row the request does not hold", id, i)
		}
		plain[i] = -1
		copy(rows[i*w:], r)
	}
	switch q := s.seq.(type) {
	case EmbedSequence:
		return q.PrefillEmbeds(ctx, plain, rows)
	case *engine.Session:
		return prefillEngineEmbeds(ctx, q, plain, rows)
	}
	return nil, errors.New("this backend does not read embedding rows (a prompt with images needs a compiled text model)")
}

// prefillEngineEmbeds feeds ids (-1 at rows of embeds) in passes of the
// session's largest plan, commits them, and returns the logits after the
// last one.
func prefillEngineEmbeds(ctx context.Context, s *engine.Session, ids []int, embeds []float32) ([]float32, error) {
	if len(ids) == 0 {
		return nil, errors.New("no tokens")
	}
	w := len(embeds) / len(ids)
	n := s.MaxRows()
	commit := make([]int, 0, n)
	var last []float32
	for lo := 0; lo < len(ids); lo += n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hi := min(lo+n, len(ids))
		p := &engine.Pass{IDs: ids[lo:hi], Logits: []int{}}
		for _, id := range p.IDs {
			if id == -1 {
				p.Embeds = embeds[lo*w : hi*w]
				break
			}
		}
		if hi == len(ids) {
			p.Logits = []int{hi - lo - 1}
		}
		out, err := s.Run(p)
		if err != nil {
			return nil, err
		}
		commit = commit[:0]
		for i := range hi - lo {
			commit = append(commit, i)
		}
		if err := s.Commit(commit); err != nil {
			return nil, err
		}
		if out.Rows() > 0 {
			last = out.Row(0)
		}
	}
	return last, nil
}
