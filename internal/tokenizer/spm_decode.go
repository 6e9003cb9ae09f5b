package tokenizer

import "strings"

// Decode turns ids into text as sentencepiece's DecodeIds does: pieces are
// concatenated with "▁" read as a space; the first piece loses its leading
// "▁" when the model adds a dummy prefix (with remove_extra_whitespaces,
// every leading "▁" piece prefix until text appears); CONTROL pieces are
// dropped; the UNKNOWN piece becomes the unk surface (" ⁇ "); BYTE pieces
// become their raw bytes, so a sequence that splits a character yields
// invalid UTF-8 (sentencepiece would print U+FFFD). Ids out of range are
// skipped.
func (sp *SentencePiece) Decode(ids []int) string {
	var b strings.Builder
	b.Grow(len(ids) * 4)
	stripLeading := sp.norm.addDummyPrefix || sp.norm.removeExtraWS
	bosWS, bosWSSeen := true, false
	for _, id := range ids {
		if id < 0 || id >= len(sp.pieces) {
			continue
		}
		p := &sp.pieces[id]
		if p.typ == PieceByte {
			if v, ok := spmPieceByte(p.text); ok {
				b.WriteByte(v)
			}
			continue
		}
		if bosWSSeen || b.Len() > 0 {
			bosWS = false
		}
		switch p.typ {
		case PieceControl:
			bosWSSeen = false
			continue
		case PieceUnknown:
			b.WriteString(sp.unkSurface)
			bosWSSeen = false
			continue
		}
		piece := p.text
		hasBosWS := false
		if bosWS && stripLeading {
			if strings.HasPrefix(piece, spmSpace) {
				piece = piece[len(spmSpace):]
				hasBosWS = true
			}
			if sp.norm.removeExtraWS {
				hasBosWS = false
			}
		}
		writeUnescaped(&b, piece)
		bosWSSeen = hasBosWS
	}
	if sp.denorm != nil {
		return string(sp.denorm.normalize(nil, b.String()))
	}
	return b.String()
}

// writeUnescaped writes piece with every "▁" replaced by a space.
func writeUnescaped(b *strings.Builder, piece string) {
	for {
		i := strings.Index(piece, spmSpace)
		if i < 0 {
			b.WriteString(piece)
			return
		}
		b.WriteString(piece[:i])
		b.WriteByte(' ')
		piece = piece[i+len(spmSpace):]
	}
}
