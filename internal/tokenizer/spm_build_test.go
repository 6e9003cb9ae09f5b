package tokenizer

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// testPiece is a vocabulary entry for spmModelBytes.
type testPiece struct {
	text  string
	score float32
	typ   PieceType
}

// spmModelBytes serializes a ModelProto: pieces, trainer_spec (model_type,
// byte_fallback) and normalizer_spec (add_dummy_prefix,
// remove_extra_whitespaces).
func spmModelBytes(pieces []testPiece, model ModelType, byteFallback, dummy, removeWS bool) []byte {
	var b []byte
	for _, p := range pieces {
		var m []byte
		m = protowire.AppendTag(m, 1, protowire.BytesType)
		m = protowire.AppendString(m, p.text)
		m = protowire.AppendTag(m, 2, protowire.Fixed32Type)
		m = protowire.AppendFixed32(m, math.Float32bits(p.score))
		m = protowire.AppendTag(m, 3, protowire.VarintType)
		m = protowire.AppendVarint(m, uint64(p.typ))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	var ts []byte
	ts = protowire.AppendTag(ts, 3, protowire.VarintType)
	ts = protowire.AppendVarint(ts, uint64(model))
	ts = protowire.AppendTag(ts, 35, protowire.VarintType)
	ts = protowire.AppendVarint(ts, protowire.EncodeBool(byteFallback))
	ts = protowire.AppendTag(ts, 43, protowire.VarintType)
	ts = protowire.AppendVarint(ts, uint64(math.MaxUint64)) // pad_id -1
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, ts)
	var ns []byte
	ns = protowire.AppendTag(ns, 1, protowire.BytesType)
	ns = protowire.AppendString(ns, "identity")
	ns = protowire.AppendTag(ns, 3, protowire.VarintType)
	ns = protowire.AppendVarint(ns, protowire.EncodeBool(dummy))
	ns = protowire.AppendTag(ns, 4, protowire.VarintType)
	ns = protowire.AppendVarint(ns, protowire.EncodeBool(removeWS))
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	return protowire.AppendBytes(b, ns)
}

func basePieces() []testPiece {
	return []testPiece{{"<unk>", 0, PieceUnknown}, {"<s>", 0, PieceControl}, {"</s>", 0, PieceControl}}
}

func TestParseSentencePieceHostile(t *testing.T) {
	valid := spmModelBytes(append(basePieces(), testPiece{"a", -1, PieceNormal}), ModelBPE, false, true, true)
	if _, err := ParseSentencePiece(valid); err != nil {
		t.Fatalf("valid model: %v", err)
	}
	pieceWith := func(field protowire.Number, typ protowire.Type, val []byte) []byte {
		var m []byte
		m = protowire.AppendTag(m, field, typ)
		m = append(m, val...)
		b := protowire.AppendTag(slices.Clone(valid), 1, protowire.BytesType)
		return protowire.AppendBytes(b, m)
	}
	trainerWith := func(field protowire.Number, v uint64) []byte {
		var m []byte
		m = protowire.AppendTag(m, field, protowire.VarintType)
		m = protowire.AppendVarint(m, v)
		b := protowire.AppendTag(slices.Clone(valid), 2, protowire.BytesType)
		return protowire.AppendBytes(b, m)
	}
	normWith := func(field protowire.Number, val []byte) []byte {
		var m []byte
		m = protowire.AppendTag(m, field, protowire.BytesType)
		m = protowire.AppendBytes(m, val)
		b := protowire.AppendTag(slices.Clone(valid), 3, protowire.BytesType)
		return protowire.AppendBytes(b, m)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated", valid[:len(valid)-3], "normalizer_spec"},
		{"length past end", append(slices.Clone(valid), 0x0a, 0x7f), "field pieces"},
		{"bad tag", append(slices.Clone(valid), 0x80), "model"},
		{"pieces not bytes", append(slices.Clone(valid), 0x08, 0x01), "pieces"},
		{"score wrong wire type", pieceWith(2, protowire.VarintType, []byte{1}), ".score"},
		{"unknown piece type", pieceWith(3, protowire.VarintType, []byte{9}), ".type"},
		{"empty piece", pieceWith(2, protowire.Fixed32Type, []byte{0, 0, 0, 0}), ".piece"},
		{"duplicate piece", spmModelBytes(append(basePieces(), testPiece{"a", 0, PieceNormal}, testPiece{"a", 0, PieceNormal}), ModelBPE, false, true, true), "already defined"},
		{"no unk", spmModelBytes([]testPiece{{"a", 0, PieceNormal}}, ModelBPE, false, true, true), "UNKNOWN"},
		{"two unk", spmModelBytes(append(basePieces(), testPiece{"<u2>", 0, PieceUnknown}), ModelBPE, false, true, true), "UNKNOWN"},
		{"byte piece without fallback", spmModelBytes(append(basePieces(), testPiece{"<0x41>", 0, PieceByte}), ModelBPE, false, true, true), "byte_fallback"},
		{"missing byte pieces", spmModelBytes(append(basePieces(), testPiece{"<0x41>", 0, PieceByte}), ModelBPE, true, true, true), "<0x00>"},
		{"bad byte piece", spmModelBytes(append(basePieces(), testPiece{"<0xZZ>", 0, PieceByte}), ModelBPE, true, true, true), "invalid byte piece"},
		{"model type word", trainerWith(3, 3), "model_type"},
		{"unk id overflow", trainerWith(40, 1<<40), "unk_id"},
		{"charsmap too short", normWith(2, []byte{1, 0}), "precompiled_charsmap"},
		{"charsmap trie past end", normWith(2, []byte{0xff, 0xff, 0, 0, 1, 2, 3, 4}), "precompiled_charsmap"},
		{"empty", nil, "pieces"},
	} {
		_, err := ParseSentencePiece(tc.data)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}

// bruteUnigram returns the best segmentation score of s by trying every
// split into vocabulary pieces (no unknowns).
func bruteUnigram(s string, vocab map[string]float32) (float64, bool) {
	if s == "" {
		return 0, true
	}
	best, found := math.Inf(-1), false
	for l := 1; l <= len(s); l++ {
		sc, ok := vocab[s[:l]]
		if !ok {
			continue
		}
		if rest, ok := bruteUnigram(s[l:], vocab); ok && float64(sc)+rest > best {
			best, found = float64(sc)+rest, true
		}
	}
	return best, found
}

// TestUnigramViterbiMatchesBruteForce compares the Viterbi path score with
// exhaustive search on random vocabularies over a 3-letter alphabet
// (tolerance 1e-4 for float32 score sums).
func TestUnigramViterbiMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		pieces := basePieces()
		vocab := map[string]float32{}
		for _, c := range []string{"a", "b", "c", "▁"} {
			vocab[c] = -5 - rng.Float32()
		}
		for range 20 {
			var w strings.Builder
			for range 2 + rng.IntN(3) {
				w.WriteString([]string{"a", "b", "c", "▁"}[rng.IntN(4)])
			}
			vocab[w.String()] = -rng.Float32() * 6
		}
		for w, s := range vocab {
			pieces = append(pieces, testPiece{w, s, PieceNormal})
		}
		sp, err := ParseSentencePiece(spmModelBytes(pieces, ModelUnigram, false, true, false))
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		for range 1 + rng.IntN(10) {
			text.WriteByte("abc "[rng.IntN(4)])
		}
		ids := sp.Encode(text.String(), EncodeOptions{})
		got := 0.0
		var joined strings.Builder
		for _, id := range ids {
			got += float64(sp.Score(id))
			joined.WriteString(sp.Token(id))
		}
		norm := "▁" + strings.ReplaceAll(text.String(), " ", "▁")
		want, _ := bruteUnigram(norm, vocab)
		if joined.String() != norm || math.Abs(got-want) > 1e-4 {
			t.Fatalf("trial %d: %q -> %v (score %v, pieces %q), best score %v", trial, text.String(), ids, got, joined.String(), want)
		}
	}
}

func TestSentencePieceUnknownAndUserDefined(t *testing.T) {
	pieces := append(basePieces(),
		testPiece{"▁", -1, PieceNormal}, testPiece{"a", -2, PieceNormal}, testPiece{"b", -2, PieceNormal},
		testPiece{"ab", -1, PieceNormal}, testPiece{"<mask>", 0, PieceUserDefined}, testPiece{"▁a", -0.5, PieceNormal})
	for _, model := range []ModelType{ModelBPE, ModelUnigram} {
		sp, err := ParseSentencePiece(spmModelBytes(pieces, model, false, true, true))
		if err != nil {
			t.Fatal(err)
		}
		// Unknown characters: a run becomes one unk (no byte fallback), and
		// decodes as the unk surface " ⁇ ".
		ids := sp.Encode("a xyz<mask>b", EncodeOptions{})
		want := []int{8, 3, 0, 7, 5}
		if !slices.Equal(ids, want) {
			t.Errorf("%v: Encode = %v, want %v", model, ids, want)
		}
		if got := sp.Decode(ids); got != "a  ⁇ <mask>b" {
			t.Errorf("%v: Decode = %q", model, got)
		}
		// ParseSpecial turns "<s>" into BOS; without it "<s>" is text.
		if got := sp.Encode("<s>a", EncodeOptions{ParseSpecial: true}); !slices.Equal(got, []int{1, 8}) {
			t.Errorf("%v: ParseSpecial = %v", model, got)
		}
		if got := sp.Encode("<s>a", EncodeOptions{}); slices.Contains(got, 1) {
			t.Errorf("%v: <s> parsed without ParseSpecial: %v", model, got)
		}
		if got := sp.Decode([]int{1, 8, 2, 99, -1}); got != "a" {
			t.Errorf("%v: control/out-of-range decode = %q", model, got)
		}
		if fmt.Sprint(sp.Model()) != map[ModelType]string{ModelBPE: "bpe", ModelUnigram: "unigram"}[model] {
			t.Errorf("Model() = %v", sp.Model())
		}
	}
}

// TestCharsMapLookup builds a one-key double array by hand ("a" -> "b"):
// root offset 1; node 1^'a' = 0x60 holds label 'a', has_leaf, offset 1;
// its leaf 0x61 holds value 0 (offset of "b\x00"). Lookups must follow the
// darts-clone walk and stay inside the array for any other input.
func TestCharsMapLookup(t *testing.T) {
	units := make([]uint32, 0x62)
	units[0] = 1 << 10
	units[0x60] = 'a' | 1<<8 | 1<<10
	units[0x61] = 1 << 31
	blob := binary.LittleEndian.AppendUint32(nil, uint32(4*len(units)))
	for _, u := range units {
		blob = binary.LittleEndian.AppendUint32(blob, u)
	}
	blob = append(blob, "b\x00"...)
	cm, err := parseSpmCharsMap(blob, "normalizer_spec.precompiled_charsmap")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   string
		repl string
		n    int
	}{{"a", "b", 1}, {"ax", "b", 1}, {"x", "", 0}, {"\xff", "", 0}, {"", "", 0}} {
		if repl, n := cm.longest(tc.in); repl != tc.repl || n != tc.n {
			t.Errorf("longest(%q) = %q, %d; want %q, %d", tc.in, repl, n, tc.repl, tc.n)
		}
	}
	n := spmNormalizer{addDummyPrefix: true, removeExtraWS: true, escapeWS: true, charsmap: cm}
	if got := string(n.normalize(nil, "  a xa  ")); got != "▁b▁xb" {
		t.Errorf("normalize = %q", got)
	}
}
