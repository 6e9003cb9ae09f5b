package tokenizer

// spmSymbol is one symbol of the text being merged: the bytes
// text[start:end], linked to its live neighbours. A frozen symbol (a
// user-defined piece) never merges.
type spmSymbol struct {
	start, end int32
	prev, next int32 // -1 at the ends
	frozen     bool
}

// spmPair is a candidate merge of symbols left and right (left's next),
// valid while both still span size bytes together.
type spmPair struct {
	score       float32
	left, right int32
	size        int32
	id          int32
}

// spmHeap is a max-heap of pairs: highest score first, then leftmost, as
// sentencepiece's agenda orders them.
type spmHeap []spmPair

func (h spmHeap) less(i, j int) bool {
	if h[i].score != h[j].score {
		return h[i].score > h[j].score
	}
	return h[i].left < h[j].left
}

func (h *spmHeap) push(p spmPair) {
	*h = append(*h, p)
	a := *h
	i := len(a) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !a.less(i, parent) {
			break
		}
		a[i], a[parent] = a[parent], a[i]
		i = parent
	}
}

func (h *spmHeap) pop() spmPair {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && a.less(r, l) {
			m = r
		}
		if !a.less(m, i) {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}

// spmMerger runs score-ordered BPE (sentencepiece's bpe_model.cc and
// llama.cpp's SPM tokenizer): repeatedly merge the adjacent pair whose
// concatenation is a vocabulary piece of the highest score, leftmost on
// ties, until no pair is a piece.
type spmMerger struct {
	vocab  map[string]int32
	scores func(id int32) float32
}

// addPair queues the pair (left, right) if it forms a piece.
func (m spmMerger) addPair(text []byte, syms []spmSymbol, h *spmHeap, left, right int32) {
	if left < 0 || right < 0 || syms[left].frozen || syms[right].frozen {
		return
	}
	a, b := syms[left].start, syms[right].end
	id, ok := m.vocab[string(text[a:b])]
	if !ok {
		return
	}
	h.push(spmPair{score: m.scores(id), left: left, right: right, size: b - a, id: id})
}

// merge merges syms (initially one per character, linked in order) in
// place; the surviving symbols are reached from index 0 through next.
func (m spmMerger) merge(text []byte, syms []spmSymbol, h *spmHeap, onMerge func(p spmPair, leftEnd int32)) {
	*h = (*h)[:0]
	for i := 1; i < len(syms); i++ {
		m.addPair(text, syms, h, int32(i-1), int32(i))
	}
	for len(*h) > 0 {
		p := h.pop()
		l, r := &syms[p.left], &syms[p.right]
		if l.start == l.end || r.start == r.end || (l.end-l.start)+(r.end-r.start) != p.size || l.next != p.right {
			continue // stale
		}
		if onMerge != nil {
			onMerge(p, l.end)
		}
		l.end = r.end
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = p.left
		}
		r.start = r.end
		m.addPair(text, syms, h, l.prev, p.left)
		m.addPair(text, syms, h, p.left, l.next)
	}
}

// spmSplitSymbols appends one symbol per character of text (or per
// user-defined piece, frozen) to syms[:0].
func spmSplitSymbols(syms []spmSymbol, text []byte, user *spmPrefixSet) []spmSymbol {
	syms = syms[:0]
	for i := 0; i < len(text); {
		n, frozen := 0, false
		if user != nil {
			if n = user.match(string(text[i:])); n > 0 {
				frozen = true
			}
		}
		if n == 0 {
			n = spmCharLen(text[i])
			if n > len(text)-i {
				n = len(text) - i
			}
		}
		idx := int32(len(syms))
		next := idx + 1
		if i+n >= len(text) {
			next = -1
		}
		syms = append(syms, spmSymbol{start: int32(i), end: int32(i + n), prev: idx - 1, next: next, frozen: frozen})
		i += n
	}
	return syms
}

// spmCharLen is the length of the UTF-8 sequence led by b, judged from b
// alone (a stray continuation byte counts as one).
func spmCharLen(b byte) int {
	switch {
	case b < 0xC0:
		return 1
	case b < 0xE0:
		return 2
	case b < 0xF0:
		return 3
	}
	return 4
}

func (sp *SentencePiece) score32(id int32) float32 { return sp.pieces[id].score }

// encodeBPE segments the normalized text with score-ordered BPE.
func (sp *SentencePiece) encodeBPE(s *spmScratch, ids []int, text []byte) []int {
	s.symbols = spmSplitSymbols(s.symbols, text, sp.norm.user)
	m := spmMerger{vocab: sp.normal, scores: sp.score32}
	var revMerge map[string]int32 // merged UNUSED piece -> length of its left part
	var onMerge func(p spmPair, leftEnd int32)
	if sp.resegmentUnused {
		syms := s.symbols
		onMerge = func(p spmPair, leftEnd int32) {
			if sp.pieces[p.id].typ != PieceUnused {
				return
			}
			if revMerge == nil {
				revMerge = make(map[string]int32)
			}
			start := syms[p.left].start
			revMerge[string(text[start:start+p.size])] = leftEnd - start
		}
	}
	m.merge(text, s.symbols, &s.heap, onMerge)
	prevUnk := false
	for i := int32(0); i >= 0 && int(i) < len(s.symbols); i = s.symbols[i].next {
		sym := s.symbols[i]
		ids = sp.resegment(ids, text[sym.start:sym.end], revMerge, &prevUnk)
	}
	return ids
}

// resegment emits piece, splitting merged UNUSED pieces into the parts they
// were merged from.
func (sp *SentencePiece) resegment(ids []int, piece []byte, revMerge map[string]int32, prevUnk *bool) []int {
	id := sp.pieceToID(string(piece))
	if revMerge != nil && sp.pieces[id].typ == PieceUnused {
		if l, ok := revMerge[string(piece)]; ok {
			ids = sp.resegment(ids, piece[:l], revMerge, prevUnk)
			return sp.resegment(ids, piece[l:], revMerge, prevUnk)
		}
	}
	return sp.emit(ids, piece, id, prevUnk)
}
