package engine

import (
	"fmt"
	"math/bits"
)

// Mask says which rows of a pass each row may attend to, on top of the
// committed cache: row i sees row j (j <= i) when bit j of row i is set.
// Every row sees itself. The zero value is invalid; make masks with
// NewMask, ChainMask or TreeMask.
type Mask struct {
	rows, words int
	bits        []uint64
}

// NewMask returns a mask of rows rows in which each row sees only itself.
func NewMask(rows int) *Mask {
	w := (rows + 63) / 64
	m := &Mask{rows: rows, words: w, bits: make([]uint64, rows*w)}
	for i := range rows {
		m.Allow(i, i)
	}
	return m
}

// ChainMask returns the causal mask: row i sees rows 0..i.
func ChainMask(rows int) *Mask {
	m := NewMask(rows)
	for i := range rows {
		for j := range i {
			m.Allow(i, j)
		}
	}
	return m
}

// TreeMask returns the mask of a token tree: parents[i] is the row that
// row i follows (-1: it follows the committed cache), always an earlier
// row, and each row sees its ancestors and itself.
func TreeMask(parents []int) (*Mask, error) {
	m := NewMask(len(parents))
	for i, p := range parents {
		if p < -1 || p >= i {
			return nil, fmt.Errorf("engine: tree row %d: parent %d is not an earlier row", i, p)
		}
		if p >= 0 {
			copy(m.row(i), m.row(p))
			m.Allow(i, i)
		}
	}
	return m, nil
}

// Rows returns the number of rows of the mask.
func (m *Mask) Rows() int { return m.rows }

// Allow lets row i see row j (j <= i).
func (m *Mask) Allow(i, j int) { m.bits[i*m.words+j/64] |= 1 << (j % 64) }

// Allowed reports whether row i sees row j.
func (m *Mask) Allowed(i, j int) bool { return m.bits[i*m.words+j/64]&(1<<(j%64)) != 0 }

func (m *Mask) row(i int) []uint64 { return m.bits[i*m.words : (i+1)*m.words] }

// seen counts the rows row i sees, itself included.
func (m *Mask) seen(i int) int {
	n := 0
	for _, w := range m.row(i) {
		n += bits.OnesCount64(w)
	}
	return n
}

// check refuses a mask that lets a row see a later row or not itself.
func (m *Mask) check() error {
	for i := range m.rows {
		if !m.Allowed(i, i) {
			return fmt.Errorf("engine: mask row %d does not see itself", i)
		}
		for j := i + 1; j < m.rows; j++ {
			if m.Allowed(i, j) {
				return fmt.Errorf("engine: mask row %d sees the later row %d", i, j)
			}
		}
	}
	return nil
}
