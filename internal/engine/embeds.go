package engine

import (
	"fmt"

	"github.com/aotlm/aotlm/internal/op"
)

// checkPassInput checks a pass's ids, and its embedding rows when it has
// them: ids are in the vocabulary, or -1 for rows read from Embeds, which
// then holds one row of the embedding width per id.
func (s *Session) checkPassInput(prog *program, p *Pass) error {
	if p.Embeds == nil {
		return s.checkIDs(p.IDs)
	}
	cols := 0
	for _, st := range prog.p.Steps {
		if st.Op != op.Embed {
			continue
		}
		c := prog.p.Buffers[st.Out].Cols
		if cols != 0 && c != cols {
			// Gemma 4's per-layer table: an embedding row has no such row
			return fmt.Errorf("engine: embedding rows given to a model with embedding tables of %d and %d columns", cols, c)
		}
		cols = c
	}
	if cols == 0 {
		return fmt.Errorf("engine: embedding rows given to a plan without an embedding step")
	}
	if len(p.Embeds) != len(p.IDs)*cols {
		return fmt.Errorf("engine: %d embedding values for a pass of %d rows of width %d", len(p.Embeds), len(p.IDs), cols)
	}
	ids := make([]int, 0, len(p.IDs))
	for _, id := range p.IDs {
		if id == -1 {
			id = 0 // an embedding row: only the cache room is checked
		}
		ids = append(ids, id)
	}
	return s.checkIDs(ids)
}
