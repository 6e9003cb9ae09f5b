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
	pos   map[int][]int     // the first id of a block -> its rows' relative rotary positions (AddAt)
	comps int               // rotary position components a row of pos carries
}

// NewEmbeds makes an empty set of rows of width values each (the text
// model's embedding width).
func NewEmbeds(width int) *Embeds {
	return &Embeds{width: width, rows: map[int][]float32{}, keys: map[int][32]byte{}, pos: map[int][]int{}}
}

// Width is the number of values of a row.
func (e *Embeds) Width() int { return e.width }

// Add holds a block of rows (whole rows of the width) under key and
// returns the prompt ids naming them, one per row in order. The rows take
// consecutive positions, like text.
func (e *Embeds) Add(key [32]byte, rows []float32) ([]int, error) {
	return e.AddAt(key, rows, nil, 0)
}

// AddAt is Add for a block whose rows sit at rotary positions of their
// own, for models whose rows carry several position components (Qwen2-VL's
// M-RoPE): pos holds comps values a row, relative to the position the
// block's first row takes (an image's (0, row, col)). The text after the
// block continues from the largest position of its rows plus one. A
// prompt holds such a block whole, in order. pos nil is Add.
func (e *Embeds) AddAt(key [32]byte, rows []float32, pos []int, comps int) ([]int, error) {
	if e.width <= 0 || len(rows) == 0 || len(rows)%e.width != 0 {
		return nil, fmt.Errorf("embedding rows of %d values are not whole rows of %d", len(rows), e.width)
	}
	n := len(rows) / e.width
	if pos != nil {
		switch {
		case comps < 1 || len(pos) != n*comps:
			return nil, fmt.Errorf("%d rotary position values for %d embedding rows of %d components", len(pos), n, comps)
		case e.comps != 0 && comps != e.comps:
			return nil, fmt.Errorf("embedding rows of %d rotary position components next to rows of %d", comps, e.comps)
		}
		for _, q := range pos {
			if q < 0 || q >= 1<<embedRowBits {
				return nil, fmt.Errorf("relative rotary position %d of an embedding row is out of range", q)
			}
		}
	}
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
	if pos != nil {
		e.pos[first], e.comps = pos, comps
	} else {
		delete(e.pos, first)
	}
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

// rowPlace returns, for an id naming row i of a block of n rows held with
// rotary positions (AddAt), that row's relative position; rel is nil for
// other ids.
func (e *Embeds) rowPlace(id int) (rel []int, i, n int) {
	if e == nil || !IsEmbedID(id) {
		return nil, 0, 0
	}
	i = (id - EmbedBase) & (1<<embedRowBits - 1)
	pos, ok := e.pos[id-i]
	if !ok || (i+1)*e.comps > len(pos) {
		return nil, 0, 0
	}
	return pos[i*e.comps : (i+1)*e.comps], i, len(pos) / e.comps
}

// blockStart moves a prompt offset that falls inside a block held with
// rotary positions back to the block's first row: such a block is placed
// whole, from the position its first row took.
func (e *Embeds) blockStart(ids []int, at int) int {
	if at >= len(ids) {
		return at
	}
	if _, i, _ := e.rowPlace(ids[at]); i > 0 {
		return max(0, at-i)
	}
	return at
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
	placed := false
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
		if rel, _, _ := emb.rowPlace(id); rel != nil {
			placed = true
		}
	}
	switch q := s.seq.(type) {
	case *engine.Session:
		var pos []int
		if placed {
			var err error
			if pos, err = rotaryPositions(ids, emb, q.NextPosition(), q.PosComponents()); err != nil {
				return nil, err
			}
		}
		return prefillEngineEmbeds(ctx, q, plain, rows, pos)
	case EmbedSequence:
		if placed {
			return nil, errors.New("this backend does not place embedding rows at rotary positions of their own")
		}
		return q.PrefillEmbeds(ctx, plain, rows)
	}
	return nil, errors.New("this backend does not read embedding rows (a prompt with images needs a compiled text model)")
}

// rotaryPositions gives each prompt row its rotary position, P components
// a row, from next on: a text row (and a row added without positions) at
// the next position in every component, the rows of a block added with
// positions at the position of its first row plus their relative ones,
// and the text after such a block from the largest component of its rows
// plus one, as Hugging Face's get_rope_index and llama.cpp's mtmd place
// Qwen2-VL's images.
func rotaryPositions(ids []int, emb *Embeds, next, P int) ([]int, error) {
	if emb.comps != P {
		return nil, fmt.Errorf("embedding rows of %d rotary position components for a model whose rows carry %d", emb.comps, P)
	}
	pos := make([]int, len(ids)*P)
	base := 0
	for t, id := range ids {
		row := pos[t*P : (t+1)*P]
		rel, i, n := emb.rowPlace(id)
		if rel == nil {
			for j := range row {
				row[j] = next
			}
			next++
			continue
		}
		switch {
		case i == 0:
			base = next
		case t == 0 || ids[t-1] != id-1:
			return nil, fmt.Errorf("prompt id %d at %d: row %d of %d of an image placed without the rows before it", id, t, i, n)
		}
		for j, q := range rel {
			row[j] = base + q
			next = max(next, base+q+1)
		}
	}
	return pos, nil
}

// prefillEngineEmbeds feeds ids (-1 at rows of embeds) in passes of the
// session's largest plan, at rotary positions when set (P values a row),
// commits them, and returns the logits after the last one.
func prefillEngineEmbeds(ctx context.Context, s *engine.Session, ids []int, embeds []float32, positions []int) ([]float32, error) {
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
		if positions != nil {
			P := len(positions) / len(ids)
			p.Positions = positions[lo*P : hi*P]
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
