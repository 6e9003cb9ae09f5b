package tokenizer

// Unigram segmentation: the Viterbi best path over the lattice of all
// vocabulary pieces in the text, scored by the sum of piece scores, as
// sentencepiece's unigram_model.cc EncodeOptimized computes it. A
// character no piece covers costs min_score - 10 (kUnkPenalty) and becomes
// unk; a USER_DEFINED piece of n bytes scores n*max_score - 0.1 so it always
// wins; UNUSED pieces are never matched.

// spmUnkPenalty is sentencepiece's kUnkPenalty.
const spmUnkPenalty = 10.0

// spmLatticeNode is the best path ending at one byte position.
type spmLatticeNode struct {
	score float32
	start int32 // -1: not reached
	id    int32
}

// buildLattice indexes every prefix of every NORMAL, USER_DEFINED and
// UNUSED piece, so the lattice walk can stop as soon as no piece can match.
func (sp *SentencePiece) buildLattice() {
	sp.lattice = make(map[string]int32, 2*len(sp.normal))
	first := true
	for _, p := range sp.pieces {
		if p.typ == PieceNormal {
			if first || p.score < sp.minScore {
				sp.minScore = p.score
			}
			if first || p.score > sp.maxScore {
				sp.maxScore = p.score
			}
			first = false
		}
	}
	for text, id := range sp.normal {
		for l := 1; l < len(text); l++ {
			if _, ok := sp.lattice[text[:l]]; !ok {
				sp.lattice[text[:l]] = -1
			}
		}
		sp.lattice[text] = id
	}
}

// encodeUnigram segments the normalized text by Viterbi.
func (sp *SentencePiece) encodeUnigram(s *spmScratch, ids []int, text []byte) []int {
	n := len(text)
	if cap(s.best) < n+1 {
		s.best = make([]spmLatticeNode, n+1)
	}
	best := s.best[:n+1]
	for i := range best {
		best[i] = spmLatticeNode{start: -1, id: -1}
	}
	unkScore := float64(sp.minScore) - spmUnkPenalty
	for start := 0; start < n; {
		base := float64(best[start].score)
		mblen := spmCharLen(text[start])
		if mblen > n-start {
			mblen = n - start
		}
		single := false
		for end := start + 1; end <= n; end++ {
			id, ok := sp.lattice[string(text[start:end])]
			if !ok {
				break
			}
			if id < 0 || sp.pieces[id].typ == PieceUnused {
				continue
			}
			length := end - start
			var score float64
			if sp.pieces[id].typ == PieceUserDefined {
				score = float64(length)*float64(sp.maxScore) - 0.1
			} else {
				score = float64(sp.pieces[id].score)
			}
			cand := float32(score + base)
			if t := &best[end]; t.start < 0 || cand > t.score {
				*t = spmLatticeNode{score: cand, start: int32(start), id: id}
			}
			if length == mblen {
				single = true
			}
		}
		if !single {
			cand := float32(unkScore + base)
			if t := &best[start+mblen]; t.start < 0 || cand > t.score {
				*t = spmLatticeNode{score: cand, start: int32(start), id: int32(sp.unkID)}
			}
		}
		start += mblen
	}
	// Backtrack, collecting piece ends in reverse, then emit in order.
	bounds := s.bounds[:0]
	for end := int32(n); end > 0; end = best[end].start {
		bounds = append(bounds, end)
	}
	s.bounds = bounds
	prevUnk := false
	prev := int32(0)
	for i := len(bounds) - 1; i >= 0; i-- {
		end := bounds[i]
		ids = sp.emit(ids, text[prev:end], best[end].id, &prevUnk)
		prev = end
	}
	return ids
}
