package quant

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// FuzzLoadRecipe: any bytes either load as a recipe that validates and
// survives a marshal/parse round trip, or fail with an error; never a panic.
// Seeds: the presets, a real JSON file from the test data (not a recipe),
// and hostile inputs.
func FuzzLoadRecipe(f *testing.F) {
	for _, name := range PresetNames() {
		r, _ := Preset(name)
		data, _ := json.Marshal(r)
		f.Add(data)
	}
	f.Add(testutil.ReadFile(f, "tokenizers/gemma2/special_tokens_map.json"))
	for _, s := range []string{
		``, `null`, `{}`, `[]`, `"x"`, `{"default": null}`,
		`{"default": {"scheme": "lpbq", "block": -32}}`,
		`{"default": {"scheme": "lpbq", "block": 9223372036854775808}}`,
		`{"default": {"scheme": "q4", "group": 1e999}}`,
		`{"default": {"scheme": "lpbq"}, "overrides": [{"pattern": "re:(a*)*$", "scheme": "w8"}]}`,
		`{"default": {"scheme": "lpbq"}, "overrides": [null, {"pattern": "[[", "scheme": "w8"}]}`,
		`{"default": {"scheme": "\u0000"}, "kv": "\ud800"}`,
		`{"default": {"scheme": "lpbq", "scheme": "w8"}}`,
		`{"default": {"scheme": "q4"}, "vision": {"weights": "f16"}}`,
		`{"default": {"scheme": "q4"}, "vision": {"weights": ""}}`,
		`{"default": {"scheme": "q4"}, "vision": null}`,
		`{"default": {"scheme": "lpbq"}, "overrides": [[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]}`,
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseRecipe(data)
		file := filepath.Join(dir, "r.json")
		if werr := os.WriteFile(file, data, 0o644); werr != nil {
			t.Fatal(werr)
		}
		r2, err2 := LoadRecipe(file)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("ParseRecipe err %v, LoadRecipe err %v", err, err2)
		}
		if err != nil {
			return
		}
		if !sameRecipe(r, r2) {
			t.Fatal("ParseRecipe and LoadRecipe disagree")
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("parsed recipe does not validate: %v", err)
		}
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseRecipe(out)
		if err != nil || !sameRecipe(r, back) {
			t.Fatalf("round trip of %s: %v", out, err)
		}
		for _, name := range []string{"lm_head.weight", "blk.0.attn_v.weight", ""} {
			if s := r.SchemeFor(name); s.Validate() != nil {
				t.Fatalf("SchemeFor(%q) = invalid %v", name, s)
			}
		}
	})
}

// FuzzQuantize: weights from arbitrary bytes (any float32 bit pattern,
// including NaN and Inf), any shape and block; every scheme either refuses
// the input or returns values in range and a finite dequantization.
func FuzzQuantize(f *testing.F) {
	real := stories260K(f, s260WQ, 64)
	seed := make([]byte, 4*len(real))
	for i, v := range real {
		binary.LittleEndian.PutUint32(seed[4*i:], math.Float32bits(v))
	}
	f.Add(seed, uint8(4), uint8(16))
	f.Add(seed[:4*43], uint8(1), uint8(32))
	f.Add(make([]byte, 64), uint8(2), uint8(3))
	f.Add([]byte{0, 0, 0xc0, 0x7f, 0, 0, 0x80, 0x7f, 1, 0, 0, 0, 0xff, 0xff, 0x7f, 0x7f}, uint8(2), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, rowsB, blockB uint8) {
		n := len(data) / 4
		if n == 0 || n > 4096 {
			return
		}
		rows := int(rowsB)%8 + 1
		if n%rows != 0 {
			n -= n % rows
		}
		cols := n / rows
		w := make([]float32, n)
		for i := range w {
			w[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		block := int(blockB)%130 + 1
		check := func(q *Quantized, err error, lo, hi int8) {
			if err != nil {
				return
			}
			for _, v := range q.Q {
				if v < lo || v > hi {
					t.Fatalf("%v: q = %d outside %d..%d", q.Scheme, v, lo, hi)
				}
			}
			for _, k := range q.Codes {
				if k < 1 || k > 16 {
					t.Fatalf("code %d", k)
				}
			}
			for i, v := range q.Dequantize() {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("%v: w'[%d] = %v from w = %v", q.Scheme, i, v, w[i])
				}
			}
		}
		for _, mode := range []LPBQMode{LPBQReference, LPBQRefined} {
			q, err := QuantizeLPBQ(w, rows, cols, block, mode)
			check(q, err, -7, 7)
		}
		q, err := QuantizeW8(w, rows, cols)
		check(q, err, -127, 127)
		for _, hqq := range []bool{false, true} {
			q, err = QuantizeQ4(w, rows, cols, Q4Options{Group: block, Sym: true, HQQ: hqq})
			check(q, err, -8, 7)
			q, err = QuantizeQ4(w, rows, cols, Q4Options{Group: block, HQQ: hqq})
			check(q, err, 0, 15)
		}
		q, err = QuantizeF16(w, rows, cols)
		check(q, err, 0, 0)
	})
}
