package tokenizer

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/aotlm/aotlm/internal/userfile"
)

// SentencePiece is a SentencePiece tokenizer (BPE or unigram) read from a
// .model file or built from a GGUF vocabulary. It encodes and decodes as
// the sentencepiece library does.
type SentencePiece struct {
	pieces    []spmPiece
	modelType ModelType

	// normal maps NORMAL, USER_DEFINED and UNUSED pieces to ids (the
	// pieces BPE merges into and Viterbi matches); reserved holds the
	// CONTROL, UNKNOWN and BYTE pieces.
	normal   map[string]int32
	reserved map[string]int32
	byteIDs  [256]int32 // id of <0xXX>, or the unk id when missing

	unkID, bosID, eosID, padID int
	byteFallback               bool
	unkSurface                 string
	addBOS, addEOS             bool
	// resegmentUnused splits merged UNUSED pieces back into their parts
	// (sentencepiece); llama.cpp's SPM tokenizer keeps them.
	resegmentUnused bool

	norm    spmNormalizer
	denorm  *spmNormalizer
	special *spmPrefixSet // CONTROL pieces, for EncodeOptions.ParseSpecial

	// unigram
	lattice            map[string]int32 // every prefix of a piece: id, or -1
	minScore, maxScore float32

	scratch sync.Pool // *spmScratch
}

// spmScratch is per-call working memory, reused across calls.
type spmScratch struct {
	norm    []byte
	symbols []spmSymbol
	heap    spmHeap
	best    []spmLatticeNode
	bounds  []int32
}

// LoadSentencePiece reads a SentencePiece .model file.
func LoadSentencePiece(path string) (*SentencePiece, error) {
	data, err := userfile.ReadFile(path, userfile.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("sentencepiece: %w", err)
	}
	sp, err := ParseSentencePiece(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return sp, nil
}

// ParseSentencePiece decodes a serialized SentencePiece ModelProto.
func ParseSentencePiece(data []byte) (*SentencePiece, error) {
	m, err := parseSpmModelProto(data)
	if err != nil {
		return nil, err
	}
	return newSentencePiece(m)
}

// newSentencePiece validates m as sentencepiece's ModelInterface does and
// builds the lookup tables.
func newSentencePiece(m *spmModelProto) (*SentencePiece, error) {
	if len(m.pieces) == 0 {
		return nil, newSpmError("pieces", "no pieces")
	}
	switch m.trainer.modelType {
	case ModelBPE, ModelUnigram:
	default:
		return nil, newSpmError("trainer_spec.model_type", "unsupported model type %v", m.trainer.modelType)
	}
	sp := &SentencePiece{
		pieces:          m.pieces,
		modelType:       m.trainer.modelType,
		normal:          make(map[string]int32, len(m.pieces)),
		reserved:        make(map[string]int32),
		unkID:           -1,
		byteFallback:    m.trainer.byteFallback,
		unkSurface:      m.trainer.unkSurface,
		addBOS:          true,
		resegmentUnused: true,
	}
	var user, control []string
	var bytesFound [256]bool
	for i, p := range m.pieces {
		field := fmt.Sprintf("pieces[%d]", i)
		if p.text == "" {
			return nil, newSpmError(field+".piece", "empty piece")
		}
		dst := sp.reserved
		if p.typ == PieceNormal || p.typ == PieceUserDefined || p.typ == PieceUnused {
			dst = sp.normal
		}
		if _, dup := dst[p.text]; dup {
			return nil, newSpmError(field+".piece", "%q is already defined", p.text)
		}
		dst[p.text] = int32(i)
		switch p.typ {
		case PieceUserDefined:
			user = append(user, p.text)
		case PieceControl:
			control = append(control, p.text)
		case PieceUnknown:
			if sp.unkID >= 0 {
				return nil, newSpmError(field+".type", "second UNKNOWN piece (first is %d)", sp.unkID)
			}
			sp.unkID = i
		case PieceByte:
			if !sp.byteFallback {
				return nil, newSpmError(field+".type", "byte piece %q but trainer_spec.byte_fallback is false", p.text)
			}
			b, ok := spmPieceByte(p.text)
			if !ok {
				return nil, newSpmError(field+".piece", "invalid byte piece %q", p.text)
			}
			bytesFound[b] = true
			sp.byteIDs[b] = int32(i)
		}
	}
	if sp.unkID < 0 {
		return nil, newSpmError("pieces", "no UNKNOWN piece")
	}
	for b, ok := range bytesFound {
		if !ok {
			if sp.byteFallback {
				return nil, newSpmError("pieces", "byte_fallback is set but byte piece <0x%02X> is missing", b)
			}
			sp.byteIDs[b] = int32(sp.unkID)
		}
	}
	sp.bosID = sp.specialID(m.trainer.bosID)
	sp.eosID = sp.specialID(m.trainer.eosID)
	sp.padID = sp.specialID(m.trainer.padID)
	sp.special = newSpmPrefixSet(control)
	us := newSpmPrefixSet(user)
	sp.norm = spmNormalizer{
		addDummyPrefix: m.normalizer.addDummyPrefix,
		removeExtraWS:  m.normalizer.removeExtraWS,
		escapeWS:       m.normalizer.escapeWS,
		wsAsSuffix:     m.trainer.wsAsSuffix,
		user:           us,
	}
	if len(m.normalizer.charsmap) > 0 {
		cm, err := parseSpmCharsMap(m.normalizer.charsmap, "normalizer_spec.precompiled_charsmap")
		if err != nil {
			return nil, err
		}
		sp.norm.charsmap = cm
	}
	if m.denormalizer.present && len(m.denormalizer.charsmap) > 0 {
		cm, err := parseSpmCharsMap(m.denormalizer.charsmap, "denormalizer_spec.precompiled_charsmap")
		if err != nil {
			return nil, err
		}
		sp.denorm = &spmNormalizer{
			addDummyPrefix: m.denormalizer.addDummyPrefix,
			removeExtraWS:  m.denormalizer.removeExtraWS,
			escapeWS:       m.denormalizer.escapeWS,
			charsmap:       cm,
		}
	}
	if sp.modelType == ModelUnigram {
		sp.buildLattice()
	}
	return sp, nil
}

// specialID returns id when it names a piece, -1 otherwise.
func (sp *SentencePiece) specialID(id int) int {
	if id < 0 || id >= len(sp.pieces) {
		return -1
	}
	return id
}

// spmPieceByte parses "<0xXX>" (two upper- or lower-case hex digits).
func spmPieceByte(s string) (byte, bool) {
	if len(s) != 6 || !strings.HasPrefix(s, "<0x") || s[5] != '>' {
		return 0, false
	}
	v, err := strconv.ParseUint(s[3:5], 16, 8)
	if err != nil {
		return 0, false
	}
	return byte(v), true
}

// Token returns the piece of id as stored, or "" for an id out of range.
func (sp *SentencePiece) Token(id int) string {
	if id < 0 || id >= len(sp.pieces) {
		return ""
	}
	return sp.pieces[id].text
}

// VocabSize returns the number of pieces.
func (sp *SentencePiece) VocabSize() int { return len(sp.pieces) }

// BOS returns the beginning-of-sequence id, or -1.
func (sp *SentencePiece) BOS() int { return sp.bosID }

// EOS returns the end-of-sequence id, or -1.
func (sp *SentencePiece) EOS() int { return sp.eosID }

// Unknown returns the id of the UNKNOWN piece.
func (sp *SentencePiece) Unknown() int { return sp.unkID }

// Score returns the score of id (0 for an id out of range).
func (sp *SentencePiece) Score(id int) float32 {
	if id < 0 || id >= len(sp.pieces) {
		return 0
	}
	return sp.pieces[id].score
}

// Type returns the piece type of id (0 for an id out of range).
func (sp *SentencePiece) Type(id int) PieceType {
	if id < 0 || id >= len(sp.pieces) {
		return 0
	}
	return sp.pieces[id].typ
}

// Model returns the segmentation algorithm.
func (sp *SentencePiece) Model() ModelType { return sp.modelType }

// PieceID returns the id of piece as sentencepiece's PieceToId does:
// CONTROL/UNKNOWN/BYTE pieces first, then the others, else the unk id.
func (sp *SentencePiece) PieceID(piece string) int {
	return int(sp.pieceToID(piece))
}

func (sp *SentencePiece) pieceToID(piece string) int32 {
	if id, ok := sp.reserved[piece]; ok {
		return id
	}
	if id, ok := sp.normal[piece]; ok {
		return id
	}
	return int32(sp.unkID)
}

func (sp *SentencePiece) getScratch() *spmScratch {
	if s, ok := sp.scratch.Get().(*spmScratch); ok {
		return s
	}
	return &spmScratch{}
}

// Encode tokenizes text. With opts.AddSpecial it prepends BOS (and appends
// EOS where the vocabulary asks for it, as GGUF's add_eos_token does). With
// opts.ParseSpecial, CONTROL pieces written in the text ("<s>") become their
// ids and the text between them is encoded piece by piece.
func (sp *SentencePiece) Encode(text string, opts EncodeOptions) []int {
	ids := make([]int, 0, len(text)/3+2)
	if opts.AddSpecial && sp.addBOS && sp.bosID >= 0 {
		ids = append(ids, sp.bosID)
	}
	s := sp.getScratch()
	if opts.ParseSpecial && sp.special != nil {
		start := 0
		for i := 0; i < len(text); {
			if l := sp.special.match(text[i:]); l > 0 {
				ids = sp.encodeText(s, ids, text[start:i])
				ids = append(ids, int(sp.reserved[text[i:i+l]]))
				i += l
				start = i
				continue
			}
			i++
		}
		ids = sp.encodeText(s, ids, text[start:])
	} else {
		ids = sp.encodeText(s, ids, text)
	}
	sp.scratch.Put(s)
	if opts.AddSpecial && sp.addEOS && sp.eosID >= 0 {
		ids = append(ids, sp.eosID)
	}
	return ids
}

// encodeText normalizes text and appends its segmentation to ids.
func (sp *SentencePiece) encodeText(s *spmScratch, ids []int, text string) []int {
	if text == "" {
		return ids
	}
	s.norm = sp.norm.normalize(s.norm[:0], text)
	if len(s.norm) == 0 {
		return ids
	}
	if sp.modelType == ModelUnigram {
		return sp.encodeUnigram(s, ids, s.norm)
	}
	return sp.encodeBPE(s, ids, s.norm)
}

// emit appends the ids of one segmented piece, applying byte fallback to
// unknown pieces and merging runs of unknown pieces into one unk id when
// there is no byte fallback. prevUnk carries the run state.
func (sp *SentencePiece) emit(ids []int, piece []byte, id int32, prevUnk *bool) []int {
	isUnk := int(id) == sp.unkID
	switch {
	case isUnk && sp.byteFallback:
		for _, b := range piece {
			ids = append(ids, int(sp.byteIDs[b]))
		}
	case isUnk && *prevUnk:
		// merged into the previous unk
	default:
		ids = append(ids, int(id))
	}
	*prevUnk = isUnk
	return ids
}
