package engine

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/plan"
)

// stateMagic opens a session state written by SaveState.
const stateMagic = "AOTLMSS1"

// maxStateField bounds each count a state header holds, so that a
// damaged file is refused before it sizes anything.
const maxStateField = 1 << 30

// stateShape is what a saved state must share with the session that
// loads it: the cache's element type and each layer's heads and head
// width, the recurrent state's slots, the convolution history's rows.
type stateShape struct {
	elem     uint32 // 4: float32, 2: binary16, 1: uint8, kvq4Elem: 4-bit
	heads    []uint32
	widths   []uint32
	kvRings  []uint32 // each layer's ring slots (0: the layer keeps every position)
	slots    []uint32
	ring     []uint32
	rotaries uint32 // 1 when the rows carry several rotary components
}

// kvq4Elem and kvq4VElem are the element codes of the 4-bit caches
// (plan.KVCacheQ4, plan.KVCacheQ4V) in a saved state.
const (
	kvq4Elem  = 0x40
	kvq4VElem = 0x41
)

func (s *Session) shape() stateShape {
	sh := stateShape{elem: 4}
	switch {
	case s.kh != nil:
		sh.elem = 2
	case s.ku != nil:
		sh.elem = 1
	case s.kq != nil:
		sh.elem = kvq4Elem
		if s.e.manifest.KVCache.DType == plan.KVCacheQ4V {
			sh.elem = kvq4VElem
		}
	}
	for l := range s.headDim {
		sh.heads = append(sh.heads, uint32(s.kvHeads[l]))
		sh.widths = append(sh.widths, uint32(s.headDim[l]))
		sh.kvRings = append(sh.kvRings, uint32(s.ring[l]))
	}
	for _, sl := range s.rec.snap.sets[s.rec.snap.cur] {
		sh.slots = append(sh.slots, uint32(len(sl)))
	}
	for _, r := range s.rec.conv.ring {
		sh.ring = append(sh.ring, uint32(len(r)))
	}
	if s.rotNext != nil {
		sh.rotaries = 1
	}
	return sh
}

func (sh stateShape) fields() []uint32 {
	f := []uint32{sh.elem, uint32(len(sh.heads))}
	f = append(f, sh.heads...)
	f = append(f, sh.widths...)
	f = append(f, sh.kvRings...)
	f = append(f, uint32(len(sh.slots)))
	f = append(f, sh.slots...)
	f = append(f, uint32(len(sh.ring)))
	f = append(f, sh.ring...)
	return append(f, sh.rotaries)
}

// SaveState writes the session's committed positions to w: the cache
// rows of every layer up to Pos, the recurrent state at Pos and the
// convolution history, in a form LoadState reads back into a session of
// the same model (any context of at least Pos positions). A recurrent
// session with a pass not yet committed is refused.
func (s *Session) SaveState(w io.Writer) error {
	if s.closed {
		return errors.New("engine: saving a closed session")
	}
	if s.pending > 0 && s.Recurrent() {
		return errors.New("engine: a recurrent session with an uncommitted pass cannot be saved: commit or rewind it first")
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	le := binary.LittleEndian
	bw.WriteString(stateMagic)
	f := append([]uint32{uint32(s.pos)}, s.shape().fields()...)
	f = append(f, uint32(s.rec.conv.end), uint32(s.rec.conv.at))
	if err := binary.Write(bw, le, uint32(len(f))); err != nil {
		return fmt.Errorf("engine: saving the state: %w", err)
	}
	binary.Write(bw, le, f)
	for l := range s.headDim {
		for g := range s.kvHeads[l] {
			lo, hi := s.savedRows(l, g, s.pos)
			switch {
			case s.kq != nil:
				bw.Write(s.kq[l][lo:hi])
				bw.Write(s.vq[l][lo:hi])
			case s.kh != nil:
				binary.Write(bw, le, s.kh[l][lo:hi])
				binary.Write(bw, le, s.vh[l][lo:hi])
			case s.ku != nil:
				bw.Write(s.ku[l][lo:hi])
				bw.Write(s.vu[l][lo:hi])
			default:
				binary.Write(bw, le, s.k[l][lo:hi])
				binary.Write(bw, le, s.v[l][lo:hi])
			}
		}
	}
	for _, sl := range s.rec.snap.sets[s.rec.snap.cur] {
		binary.Write(bw, le, sl)
	}
	for _, r := range s.rec.conv.ring {
		binary.Write(bw, le, r)
	}
	if s.rotNext != nil {
		rot := make([]uint32, s.pos+1)
		for i := range rot {
			rot[i] = uint32(s.rotNext[i])
		}
		binary.Write(bw, le, rot)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("engine: saving the state: %w", err)
	}
	return nil
}

// LoadState replaces the session's contents with a state SaveState
// wrote: afterwards Pos is the saved position and the next pass
// continues from it. A state of another model (other layers, heads,
// cache type or recurrent state), one longer than the session's context,
// or a damaged one is refused, and the session is then empty.
func (s *Session) LoadState(r io.Reader) (err error) {
	if s.closed {
		return errors.New("engine: loading into a closed session")
	}
	s.Reset()
	defer func() {
		if err != nil {
			s.Reset()
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = fmt.Errorf("engine: loading a session state: the data ends early: %w", err)
			}
		}
	}()
	br := bufio.NewReaderSize(r, 1<<20)
	le := binary.LittleEndian
	magic := make([]byte, len(stateMagic))
	if _, err := io.ReadFull(br, magic); err != nil {
		return err
	}
	if string(magic) != stateMagic {
		return fmt.Errorf("engine: loading a session state: the data does not start with %q: not a saved session", stateMagic)
	}
	var n uint32
	if err := binary.Read(br, le, &n); err != nil {
		return err
	}
	want := s.shape().fields()
	if int(n) != 1+len(want)+2 {
		return fmt.Errorf("engine: loading a session state: a header of %d fields, this model's has %d: the state is another model's", n, 1+len(want)+2)
	}
	f := make([]uint32, n)
	if err := binary.Read(br, le, f); err != nil {
		return err
	}
	sh := s.shape()
	ringAt := len(want) - 1 - len(sh.ring) // the ring's sizes end the fields, before rotaries
	for i, v := range want {
		if f[1+i] == v {
			continue
		}
		if L := len(sh.heads); i >= 2+2*L && i < 2+3*L {
			return fmt.Errorf("engine: loading a session state: its sliding-window layers were kept for another context size (%d ring slots, want %d): load it into a session of the context it was saved from", f[1+i], v)
		}
		if i >= ringAt && i < ringAt+len(sh.ring) {
			return fmt.Errorf("engine: loading a session state: its convolution history was kept for another context size (%d values, want %d): load it into a session of the context it was saved from", f[1+i], v)
		}
		return fmt.Errorf("engine: loading a session state: its cache shape differs from this model's (field %d: %d, want %d): the state is another model's", i, f[1+i], v)
	}
	pos := int(f[0])
	if pos > s.ctx || pos > maxStateField {
		return fmt.Errorf("engine: loading a session state of %d positions into a context of %d", pos, s.ctx)
	}
	end, at := int(f[len(f)-2]), int(f[len(f)-1])
	for l := range s.headDim {
		for g := range s.kvHeads[l] {
			lo, hi := s.savedRows(l, g, pos)
			switch {
			case s.kq != nil:
				_, err1 := io.ReadFull(br, s.kq[l][lo:hi])
				_, err2 := io.ReadFull(br, s.vq[l][lo:hi])
				err = errors.Join(err1, err2)
			case s.kh != nil:
				err = errors.Join(binary.Read(br, le, s.kh[l][lo:hi]), binary.Read(br, le, s.vh[l][lo:hi]))
			case s.ku != nil:
				_, err1 := io.ReadFull(br, s.ku[l][lo:hi])
				_, err2 := io.ReadFull(br, s.vu[l][lo:hi])
				err = errors.Join(err1, err2)
			default:
				err = errors.Join(binary.Read(br, le, s.k[l][lo:hi]), binary.Read(br, le, s.v[l][lo:hi]))
			}
			if err != nil {
				return err
			}
		}
	}
	for _, sl := range s.rec.snap.sets[s.rec.snap.cur] {
		if err := binary.Read(br, le, sl); err != nil {
			return err
		}
	}
	for _, rg := range s.rec.conv.ring {
		if err := binary.Read(br, le, rg); err != nil {
			return err
		}
	}
	if s.rotNext != nil {
		rot := make([]uint32, pos+1)
		if err := binary.Read(br, le, rot); err != nil {
			return err
		}
		for i, v := range rot {
			s.rotNext[i] = int(v)
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return errors.New("engine: loading a session state: more data after the state: not a saved session")
	}
	if end > pos || at > pos {
		return fmt.Errorf("engine: loading a session state: a convolution history up to %d past the %d positions", end, pos)
	}
	s.pos, s.pending, s.wrote = pos, 0, pos
	s.rec.conv.end, s.rec.conv.at = end, at
	sn := &s.rec.snap
	for i := range sn.pos {
		sn.pos[i] = -1
	}
	sn.pos[sn.cur] = pos
	s.rec.point(sn.cur)
	return nil
}

// MemoryBytes is the memory the session holds: its cache, its
// activations and its recurrent state.
func (s *Session) MemoryBytes() int64 {
	n := 4*int64(len(s.arena)) + s.StateMemory().Total()
	for l := range s.k {
		n += 4 * int64(len(s.k[l])+len(s.v[l]))
	}
	for l := range s.kh {
		n += 2 * int64(len(s.kh[l])+len(s.vh[l]))
	}
	for l := range s.ku {
		n += int64(len(s.ku[l]) + len(s.vu[l]))
	}
	for l := range s.kq {
		n += int64(len(s.kq[l]) + len(s.vq[l]))
	}
	return n
}

// savedRows is the range of layer l's key/value head g that a state of
// pos positions holds: its first pos slots, or the whole ring of a
// sliding-window layer, whose slots do not follow the positions.
func (s *Session) savedRows(l, g, pos int) (lo, hi int) {
	E, stride := s.headDim[l], s.stride[l]
	if s.kq != nil {
		E = kernel.KVQ4RowBytes(E) // a row's bytes
	}
	if s.ring[l] > 0 {
		return g * stride * E, (g + 1) * stride * E
	}
	return g * stride * E, (g*stride + pos) * E
}
