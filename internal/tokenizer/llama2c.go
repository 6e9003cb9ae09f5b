package tokenizer

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/aotlm/aotlm/internal/userfile"
)

// Llama2C is the tokenizer of llama2.c's tokenizer.bin:
//
//	int32le max_token_length
//	vocab_size times: float32le score | int32le len | len bytes (the piece)
//
// Pieces hold spaces where SentencePiece has "▁"; byte tokens are stored
// as the text "<0xXX>"; BOS (1) and EOS (2) are stored as "\n<s>\n" and
// "\n</s>\n". Encoding follows run.c's encode(): a " " token first (the
// dummy prefix) when the text is not empty, then one token per UTF-8 code
// point (or one byte token, id byte+3, per byte of a code point not in the
// vocabulary), then repeatedly merge the adjacent pair whose concatenation
// is the vocabulary entry with the highest score, leftmost on ties.
type Llama2C struct {
	pieces         []string
	scores         []float32
	ids            map[string]int32 // first id of each piece
	maxTokenLength int
	scratch        sync.Pool // *llama2cScratch
}

// Llama2C BOS and EOS ids, fixed by run.c.
const (
	llama2cBOS = 1
	llama2cEOS = 2
)

// LoadLlama2C reads a llama2.c tokenizer.bin holding vocabSize tokens (the
// vocab_size of the model's config header).
func LoadLlama2C(path string, vocabSize int) (*Llama2C, error) {
	data, err := userfile.ReadFile(path, userfile.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("llama2c tokenizer: %w", err)
	}
	t, err := ParseLlama2C(data, vocabSize)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ParseLlama2C decodes the bytes of a tokenizer.bin holding vocabSize
// tokens.
func ParseLlama2C(data []byte, vocabSize int) (*Llama2C, error) {
	if vocabSize <= 0 {
		return nil, fmt.Errorf("llama2c tokenizer: vocab size %d is not positive", vocabSize)
	}
	if len(data) < 4 {
		return nil, fmt.Errorf("llama2c tokenizer: field max_token_length: file of %d bytes is truncated", len(data))
	}
	maxLen := int32(binary.LittleEndian.Uint32(data))
	if maxLen < 0 {
		return nil, fmt.Errorf("llama2c tokenizer: field max_token_length: negative value %d", maxLen)
	}
	// Every token takes at least 8 bytes, which bounds vocabSize before any
	// allocation.
	if uint64(vocabSize) > uint64(len(data)-4)/8 {
		return nil, fmt.Errorf("llama2c tokenizer: vocab size %d needs more than the %d bytes of the file", vocabSize, len(data))
	}
	t := &Llama2C{
		pieces:         make([]string, vocabSize),
		scores:         make([]float32, vocabSize),
		ids:            make(map[string]int32, vocabSize),
		maxTokenLength: int(maxLen),
	}
	off := 4
	for i := 0; i < vocabSize; i++ {
		if len(data)-off < 8 {
			return nil, fmt.Errorf("llama2c tokenizer: token %d: field score/len: truncated at byte %d", i, off)
		}
		score := math.Float32frombits(binary.LittleEndian.Uint32(data[off:]))
		n := int32(binary.LittleEndian.Uint32(data[off+4:]))
		off += 8
		if n < 0 || int64(n) > int64(len(data)-off) {
			return nil, fmt.Errorf("llama2c tokenizer: token %d: field len: %d bytes at byte %d past the end of the %d-byte file", i, n, off, len(data))
		}
		piece := string(data[off : off+int(n)])
		off += int(n)
		t.pieces[i], t.scores[i] = piece, score
		if _, dup := t.ids[piece]; !dup {
			t.ids[piece] = int32(i)
		}
	}
	return t, nil
}

// Token returns the piece of id as stored, or "" for an id out of range.
func (t *Llama2C) Token(id int) string {
	if id < 0 || id >= len(t.pieces) {
		return ""
	}
	return t.pieces[id]
}

// VocabSize returns the number of tokens.
func (t *Llama2C) VocabSize() int { return len(t.pieces) }

// BOS returns 1 (llama2.c's fixed BOS id), or -1 for a smaller vocabulary.
func (t *Llama2C) BOS() int {
	if len(t.pieces) > llama2cBOS {
		return llama2cBOS
	}
	return -1
}

// EOS returns 2 (llama2.c's fixed EOS id), or -1 for a smaller vocabulary.
func (t *Llama2C) EOS() int {
	if len(t.pieces) > llama2cEOS {
		return llama2cEOS
	}
	return -1
}

// Score returns the merge score of id (0 for an id out of range).
func (t *Llama2C) Score(id int) float32 {
	if id < 0 || id >= len(t.scores) {
		return 0
	}
	return t.scores[id]
}

// Encode tokenizes text as run.c's encode(text, bos, eos=0) does. With
// opts.AddSpecial it prepends BOS (run.c's generate passes bos=1, eos=0).
// ParseSpecial has no effect: llama2.c has no special-token syntax.
//
// run.c rescans all pairs after every merge; the same merges are found here
// with a heap ordered by (score, position), which picks the same pair.
func (t *Llama2C) Encode(text string, opts EncodeOptions) []int {
	ids := make([]int, 0, len(text)/3+2)
	if opts.AddSpecial && t.BOS() >= 0 {
		ids = append(ids, llama2cBOS)
	}
	if text == "" {
		return ids
	}
	s, _ := t.scratch.Get().(*llama2cScratch)
	if s == nil {
		s = &llama2cScratch{}
	}
	s.buf, s.syms, s.ids = s.buf[:0], s.syms[:0], s.ids[:0]
	add := func(id int32) {
		start := int32(len(s.buf))
		s.buf = append(s.buf, t.pieces[id]...)
		end := int32(len(s.buf))
		n := int32(len(s.syms))
		s.syms = append(s.syms, spmSymbol{start: start, end: end, prev: n - 1, next: n + 1, frozen: start == end})
		s.ids = append(s.ids, id)
	}
	if id, ok := t.ids[" "]; ok {
		add(id) // the dummy prefix
	}
	// One token per code point: a lead byte starts a new buffer, up to three
	// continuation bytes join it.
	for i := 0; i < len(text); {
		j := i + 1
		for j < len(text) && text[j]&0xC0 == 0x80 && j-i < 4 {
			j++
		}
		if id, ok := t.ids[text[i:j]]; ok {
			add(id)
		} else {
			for k := i; k < j; k++ {
				if id := int32(text[k]) + 3; int(id) < len(t.pieces) {
					add(id)
				} else {
					add(0) // byte id past a tiny vocabulary: unk
				}
			}
		}
		i = j
	}
	if len(s.syms) > 0 {
		s.syms[len(s.syms)-1].next = -1
		m := spmMerger{vocab: t.ids, scores: t.score32}
		m.merge(s.buf, s.syms, &s.heap, func(p spmPair, _ int32) { s.ids[p.left] = p.id })
		for i := int32(0); i >= 0; i = s.syms[i].next {
			ids = append(ids, int(s.ids[i]))
		}
	}
	t.scratch.Put(s)
	return ids
}

// llama2cScratch is per-call working memory, reused across calls.
type llama2cScratch struct {
	buf  []byte
	syms []spmSymbol
	ids  []int32
	heap spmHeap
}

func (t *Llama2C) score32(id int32) float32 { return t.scores[id] }

// Decode concatenates the pieces of ids as run.c's decode() prints them:
// "<0xXX>" pieces become the byte, BOS and EOS are skipped, and the piece
// after BOS, or the first piece, loses one leading space (the dummy prefix).
// Ids out of range are skipped.
func (t *Llama2C) Decode(ids []int) string {
	var b strings.Builder
	prev := llama2cBOS
	for _, id := range ids {
		if id < 0 || id >= len(t.pieces) {
			continue
		}
		if id == llama2cBOS || id == llama2cEOS {
			prev = id
			continue
		}
		piece := t.pieces[id]
		if prev == llama2cBOS && strings.HasPrefix(piece, " ") {
			piece = piece[1:]
		}
		prev = id
		if v, ok := spmPieceByte(piece); ok {
			b.WriteByte(v)
			continue
		}
		b.WriteString(piece)
	}
	return b.String()
}
