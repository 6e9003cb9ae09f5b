package tokenizer

import (
	"encoding/json"
	"fmt"
	"math"
	"unicode/utf8"
)

// hfUnigram is the Unigram model: the segmentation with the highest total
// log-probability (Viterbi), pieces scored by the vocabulary.
type hfUnigram struct {
	scores   []float64 // by id
	maxLen   int       // longest piece in bytes
	unkScore float64
}

// unigramModel reads vocab [[piece, score], ...] and unk_id.
func (p hfParser) unigramModel(b *BPE, m *hfModel) error {
	var vocab [][2]json.RawMessage
	if err := json.Unmarshal(m.Vocab, &vocab); err != nil {
		return p.errf("model.vocab", "%v", err)
	}
	if len(vocab) >= maxVocab {
		return p.errf("model.vocab", "%d pieces", len(vocab))
	}
	u := &hfUnigram{scores: make([]float64, len(vocab))}
	minScore := math.Inf(1)
	for i, e := range vocab {
		var piece string
		var score float64
		if json.Unmarshal(e[0], &piece) != nil || json.Unmarshal(e[1], &score) != nil {
			return p.errf(fmt.Sprintf("model.vocab[%d]", i), "not a [piece, score] pair")
		}
		if piece == "" {
			return p.errf(fmt.Sprintf("model.vocab[%d]", i), "empty piece")
		}
		if math.IsNaN(score) || math.IsInf(score, 0) {
			return p.errf(fmt.Sprintf("model.vocab[%d]", i), "score %v", score)
		}
		if _, dup := b.ids[piece]; !dup {
			b.ids[piece] = int32(i)
		}
		b.setToken(int32(i), piece)
		u.scores[i] = score
		u.maxLen = max(u.maxLen, len(piece))
		minScore = min(minScore, score)
	}
	// An unknown character costs more than any piece (as sentencepiece).
	u.unkScore = minScore - 10
	if m.UnkID != nil {
		if *m.UnkID < 0 || *m.UnkID >= int64(len(vocab)) {
			return p.errf("model.unk_id", "%d out of range", *m.UnkID)
		}
		b.unk = int32(*m.UnkID)
	}
	b.byteFallback = m.ByteFallback
	b.fuseUnk = true
	b.uni = u
	return nil
}

// encode appends the best segmentation of word.
func (u *hfUnigram) encode(b *BPE, out []int, word string) []int {
	n := len(word)
	type node struct {
		score float64
		start int   // start of the last piece
		id    int32 // its id, -1 for an unknown character
	}
	best := make([]node, n+1)
	for i := 1; i <= n; i++ {
		best[i].score = math.Inf(-1)
	}
	for i := 0; i < n; {
		if math.IsInf(best[i].score, -1) {
			_, size := utf8.DecodeRuneInString(word[i:])
			i += size
			continue
		}
		_, size := utf8.DecodeRuneInString(word[i:])
		matched := false
		for j := i + 1; j <= n && j-i <= u.maxLen; j++ {
			if id, ok := b.ids[word[i:j]]; ok {
				if j-i == size {
					matched = true
				}
				if s := best[i].score + u.scores[id]; s > best[j].score {
					best[j] = node{s, i, id}
				}
			}
		}
		if !matched {
			if s := best[i].score + u.unkScore; s > best[i+size].score {
				best[i+size] = node{s, i, -1}
			}
		}
		i += size
	}
	// Walk back, then emit in order.
	var rev []node
	for j := n; j > 0; j = best[j].start {
		nd := best[j]
		rev = append(rev, node{start: j, id: nd.id, score: float64(nd.start)})
	}
	lastUnk := false
	for k := len(rev) - 1; k >= 0; k-- {
		nd := rev[k]
		if nd.id >= 0 {
			out = append(out, int(nd.id))
			lastUnk = false
			continue
		}
		piece := word[int(nd.score):nd.start]
		if b.byteFallback {
			okAll := true
			for i := 0; i < len(piece); i++ {
				okAll = okAll && b.fallbackIDs[piece[i]] >= 0
			}
			if okAll {
				for i := 0; i < len(piece); i++ {
					out = append(out, int(b.fallbackIDs[piece[i]]))
				}
				lastUnk = false
				continue
			}
		}
		if b.unk >= 0 && !(b.fuseUnk && lastUnk) {
			out = append(out, int(b.unk))
		}
		lastUnk = true
	}
	return out
}
