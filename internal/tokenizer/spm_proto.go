package tokenizer

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// The SentencePiece .model file is one protobuf message, ModelProto
// (sentencepiece_model.proto, proto2). Only the fields the encoder and
// decoder need are read; every other field is skipped.
//
//	ModelProto
//	  1 pieces            repeated SentencePiece
//	  2 trainer_spec      TrainerSpec
//	  3 normalizer_spec   NormalizerSpec
//	  5 denormalizer_spec NormalizerSpec
//	SentencePiece
//	  1 piece string, 2 score float, 3 type enum (default NORMAL)
//	TrainerSpec
//	  3 model_type (UNIGRAM=1 default, BPE=2, WORD=3, CHAR=4)
//	  4 vocab_size, 24 treat_whitespace_as_suffix, 35 byte_fallback
//	  40 unk_id (0), 41 bos_id (1), 42 eos_id (2), 43 pad_id (-1)
//	  44 unk_surface (default " ⁇ ")
//	NormalizerSpec
//	  1 name, 2 precompiled_charsmap, 3 add_dummy_prefix (true),
//	  4 remove_extra_whitespaces (true), 5 escape_whitespaces (true)

// PieceType is the type of a SentencePiece vocabulary entry.
type PieceType int8

// Piece types, numbered as in sentencepiece_model.proto (and GGUF's
// tokenizer.ggml.token_type).
const (
	PieceNormal      PieceType = 1
	PieceUnknown     PieceType = 2
	PieceControl     PieceType = 3
	PieceUserDefined PieceType = 4
	PieceUnused      PieceType = 5
	PieceByte        PieceType = 6
)

// ModelType is the segmentation algorithm of a SentencePiece model.
type ModelType int

// Model types, numbered as in sentencepiece_model.proto.
const (
	ModelUnigram ModelType = 1
	ModelBPE     ModelType = 2
	ModelWord    ModelType = 3
	ModelChar    ModelType = 4
)

func (m ModelType) String() string {
	switch m {
	case ModelUnigram:
		return "unigram"
	case ModelBPE:
		return "bpe"
	case ModelWord:
		return "word"
	case ModelChar:
		return "char"
	}
	return fmt.Sprintf("ModelType(%d)", int(m))
}

// spmPiece is one vocabulary entry.
type spmPiece struct {
	text  string
	score float32
	typ   PieceType
}

// spmTrainerSpec holds the TrainerSpec fields that change encoding.
type spmTrainerSpec struct {
	modelType    ModelType
	byteFallback bool
	wsAsSuffix   bool
	unkID        int
	bosID        int
	eosID        int
	padID        int
	unkSurface   string
}

// spmNormalizerSpec holds a NormalizerSpec.
type spmNormalizerSpec struct {
	name           string
	charsmap       []byte
	addDummyPrefix bool
	removeExtraWS  bool
	escapeWS       bool
	present        bool
}

// spmModelProto is the decoded ModelProto.
type spmModelProto struct {
	pieces       []spmPiece
	trainer      spmTrainerSpec
	normalizer   spmNormalizerSpec
	denormalizer spmNormalizerSpec
}

const spmFormat = "sentencepiece"

// spmError reports a malformed field of a .model file.
type spmError struct {
	field string
	msg   string
}

func (e *spmError) Error() string {
	return fmt.Sprintf("sentencepiece: field %s: %s", e.field, e.msg)
}

func newSpmError(field, format string, args ...any) error {
	return &spmError{field: field, msg: fmt.Sprintf(format, args...)}
}

func spmDefaultTrainer() spmTrainerSpec {
	return spmTrainerSpec{modelType: ModelUnigram, unkID: 0, bosID: 1, eosID: 2, padID: -1, unkSurface: " \u2047 "}
}

func spmDefaultNormalizer() spmNormalizerSpec {
	return spmNormalizerSpec{addDummyPrefix: true, removeExtraWS: true, escapeWS: true}
}

// spmFieldNames names the fields read, for error messages.
var spmFieldNames = map[string]map[protowire.Number]string{
	"model":        {1: "pieces", 2: "trainer_spec", 3: "normalizer_spec", 5: "denormalizer_spec"},
	"trainer_spec": {3: "trainer_spec.model_type", 35: "trainer_spec.byte_fallback", 40: "trainer_spec.unk_id", 41: "trainer_spec.bos_id", 42: "trainer_spec.eos_id", 43: "trainer_spec.pad_id", 44: "trainer_spec.unk_surface"},
}

// spmField is one decoded field of a message.
type spmField struct {
	num     protowire.Number
	typ     protowire.Type
	varint  uint64
	fixed32 uint32
	bytes   []byte
}

// spmWalk calls fn for every field of the message in b. name prefixes
// error messages (the path of the message, e.g. "trainer_spec").
func spmWalk(b []byte, name string, fn func(f spmField) error) error {
	names := spmFieldNames[name]
	off := 0
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return newSpmError(name, "bad tag at byte %d: %v", off, protowire.ParseError(n))
		}
		b, off = b[n:], off+n
		f := spmField{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.varint, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			f.fixed32, n = protowire.ConsumeFixed32(b)
		case protowire.BytesType:
			f.bytes, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			field := fmt.Sprintf("%s.%d", name, num)
			if n, ok := names[num]; ok {
				field = n
			}
			return newSpmError(field, "bad value at byte %d: %v", off, protowire.ParseError(n))
		}
		b, off = b[n:], off+n
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// expect checks that f has wire type want.
func (f spmField) expect(field string, want protowire.Type) error {
	if f.typ != want {
		return newSpmError(field, "wire type %d, want %d", f.typ, want)
	}
	return nil
}

// int32Field decodes a varint as a proto int32 (negative values are
// sign-extended to 64 bits on the wire).
func (f spmField) int32Field(field string) (int, error) {
	if err := f.expect(field, protowire.VarintType); err != nil {
		return 0, err
	}
	v := int64(f.varint)
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, newSpmError(field, "value %d out of int32 range", v)
	}
	return int(v), nil
}

func (f spmField) boolField(field string) (bool, error) {
	if err := f.expect(field, protowire.VarintType); err != nil {
		return false, err
	}
	return f.varint != 0, nil
}

func (f spmField) stringField(field string) (string, error) {
	if err := f.expect(field, protowire.BytesType); err != nil {
		return "", err
	}
	return string(f.bytes), nil
}

// parseSpmModelProto decodes a serialized ModelProto.
func parseSpmModelProto(data []byte) (*spmModelProto, error) {
	m := &spmModelProto{trainer: spmDefaultTrainer(), normalizer: spmDefaultNormalizer(), denormalizer: spmDefaultNormalizer()}
	err := spmWalk(data, "model", func(f spmField) error {
		switch f.num {
		case 1:
			if err := f.expect("pieces", protowire.BytesType); err != nil {
				return err
			}
			p, err := parseSpmPiece(f.bytes, len(m.pieces))
			if err != nil {
				return err
			}
			m.pieces = append(m.pieces, p)
		case 2:
			if err := f.expect("trainer_spec", protowire.BytesType); err != nil {
				return err
			}
			return parseSpmTrainerSpec(f.bytes, &m.trainer)
		case 3:
			if err := f.expect("normalizer_spec", protowire.BytesType); err != nil {
				return err
			}
			return parseSpmNormalizerSpec(f.bytes, "normalizer_spec", &m.normalizer)
		case 5:
			if err := f.expect("denormalizer_spec", protowire.BytesType); err != nil {
				return err
			}
			return parseSpmNormalizerSpec(f.bytes, "denormalizer_spec", &m.denormalizer)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func parseSpmPiece(b []byte, index int) (spmPiece, error) {
	name := fmt.Sprintf("pieces[%d]", index)
	p := spmPiece{typ: PieceNormal}
	err := spmWalk(b, name, func(f spmField) error {
		var err error
		switch f.num {
		case 1:
			p.text, err = f.stringField(name + ".piece")
		case 2:
			if err = f.expect(name+".score", protowire.Fixed32Type); err == nil {
				p.score = math.Float32frombits(f.fixed32)
			}
		case 3:
			var t int
			if t, err = f.int32Field(name + ".type"); err == nil {
				if t < int(PieceNormal) || t > int(PieceByte) {
					return newSpmError(name+".type", "unknown piece type %d", t)
				}
				p.typ = PieceType(t)
			}
		}
		return err
	})
	return p, err
}

func parseSpmTrainerSpec(b []byte, t *spmTrainerSpec) error {
	return spmWalk(b, "trainer_spec", func(f spmField) error {
		var err error
		switch f.num {
		case 3:
			var v int
			if v, err = f.int32Field("trainer_spec.model_type"); err == nil {
				t.modelType = ModelType(v)
			}
		case 24:
			t.wsAsSuffix, err = f.boolField("trainer_spec.treat_whitespace_as_suffix")
		case 35:
			t.byteFallback, err = f.boolField("trainer_spec.byte_fallback")
		case 40:
			t.unkID, err = f.int32Field("trainer_spec.unk_id")
		case 41:
			t.bosID, err = f.int32Field("trainer_spec.bos_id")
		case 42:
			t.eosID, err = f.int32Field("trainer_spec.eos_id")
		case 43:
			t.padID, err = f.int32Field("trainer_spec.pad_id")
		case 44:
			t.unkSurface, err = f.stringField("trainer_spec.unk_surface")
		}
		return err
	})
}

func parseSpmNormalizerSpec(b []byte, name string, n *spmNormalizerSpec) error {
	n.present = true
	return spmWalk(b, name, func(f spmField) error {
		var err error
		switch f.num {
		case 1:
			n.name, err = f.stringField(name + ".name")
		case 2:
			if err = f.expect(name+".precompiled_charsmap", protowire.BytesType); err == nil {
				n.charsmap = f.bytes
			}
		case 3:
			n.addDummyPrefix, err = f.boolField(name + ".add_dummy_prefix")
		case 4:
			n.removeExtraWS, err = f.boolField(name + ".remove_extra_whitespaces")
		case 5:
			n.escapeWS, err = f.boolField(name + ".escape_whitespaces")
		}
		return err
	})
}
