package llama2c

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// DefaultGroupSize is the version 2 group size used when Config.GroupSize
// is 0; it is halved until it divides Dim, as llama2.c's exporter does.
const DefaultGroupSize = 64

// RopeTheta is the RoPE base of the version 0 freq_cis tables.
const RopeTheta = 10000

// WriteV0 writes a legacy (version 0) file. tensors maps the names listed
// in the package documentation to row-major values; "freq_cis_real" and
// "freq_cis_imag" are computed (theta 10000) unless given.
func WriteV0(path string, cfg Config, tensors map[string][]float32) error {
	return write(path, cfg, 0, tensors)
}

// WriteV1 writes a version 1 (float32) file.
func WriteV1(path string, cfg Config, tensors map[string][]float32) error {
	return write(path, cfg, 1, tensors)
}

// WriteV2 writes a version 2 file: norms in float32, matrices quantized
// with Quantize in groups of cfg.GroupSize (DefaultGroupSize when 0).
func WriteV2(path string, cfg Config, tensors map[string][]float32) error {
	return write(path, cfg, 2, tensors)
}

// Quantize quantizes w in groups of g values (len(w) % g == 0) the way
// llama2.c's exporter does: scale = max|w| / 127 per group, q =
// round-half-even(w / scale). An all-zero group gets scale 0 and q 0. The
// dequantized q*scale differs from w by at most scale/2 (plus float32
// rounding), i.e. max|group| / 254.
func Quantize(w []float32, g int) (q []int8, scales []float32) {
	q = make([]int8, len(w))
	scales = make([]float32, len(w)/g)
	for gi := range scales {
		group := w[gi*g : (gi+1)*g]
		var wmax float32
		for _, v := range group {
			wmax = max(wmax, float32(math.Abs(float64(v))))
		}
		s := wmax / 127
		scales[gi] = s
		if s == 0 {
			continue
		}
		for i, v := range group {
			r := math.RoundToEven(float64(v / s))
			q[gi*g+i] = int8(max(-127, min(127, r)))
		}
	}
	return q, scales
}

// FreqCis returns llama2.c's legacy RoPE tables [seqLen, headSize/2]: cos
// and sin of pos * theta^(-2i/headSize), computed in float64 and rounded
// to float32.
func FreqCis(seqLen, headSize int, theta float64) (cos, sin []float32) {
	half := headSize / 2
	cos = make([]float32, seqLen*half)
	sin = make([]float32, seqLen*half)
	for i := range half {
		freq := math.Pow(theta, -float64(2*i)/float64(headSize))
		for p := range seqLen {
			cos[p*half+i] = float32(math.Cos(float64(p) * freq))
			sin[p*half+i] = float32(math.Sin(float64(p) * freq))
		}
	}
	return cos, sin
}

func write(path string, cfg Config, version int, tensors map[string][]float32) (err error) {
	if version == 2 {
		if cfg.GroupSize == 0 {
			cfg.GroupSize = DefaultGroupSize
			for cfg.Dim > 0 && cfg.Dim%cfg.GroupSize != 0 {
				cfg.GroupSize /= 2
			}
		}
	} else {
		cfg.GroupSize = 0
	}
	if err := cfg.validate(path, version); err != nil {
		return err
	}
	slots := layout(cfg, version)
	known := map[string]bool{}
	for _, s := range slots {
		known[s.name] = true
	}
	for name := range tensors {
		if !known[name] && name != NameFreqReal && name != NameFreqImag {
			return fmt.Errorf("llama2c: writing %s: tensor %q has no place in a version %d file (shared classifier %v)",
				path, name, version, cfg.SharedClassifier)
		}
	}
	values := make([][]float32, len(slots))
	for i, s := range slots {
		v, ok := tensors[s.name]
		if !ok && (s.name == NameFreqReal || s.name == NameFreqImag) {
			re, im := FreqCis(cfg.SeqLen, cfg.HeadSize(), RopeTheta)
			v = re
			if s.name == NameFreqImag {
				v = im
			}
			ok = true
		}
		if !ok {
			return fmt.Errorf("llama2c: writing %s: missing tensor %q", path, s.name)
		}
		if int64(len(v)) != s.numel() {
			return fmt.Errorf("llama2c: writing %s: tensor %q has %d values, shape %v needs %d",
				path, s.name, len(v), s.shape, s.numel())
		}
		values[i] = v
	}

	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("llama2c: writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	w.Write(encodeHeader(cfg, version))
	for i, s := range slots {
		if !s.quant {
			writeF32(w, values[i])
			continue
		}
		q, scales := Quantize(values[i], cfg.GroupSize)
		for _, v := range q {
			w.WriteByte(byte(v))
		}
		writeF32(w, scales)
	}
	if err := w.Flush(); err != nil { // bufio keeps the first write error
		return fmt.Errorf("llama2c: writing %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("llama2c: writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("llama2c: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("llama2c: writing %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("llama2c: writing %s: %w", path, err)
	}
	return nil
}

func writeF32(w *bufio.Writer, v []float32) {
	var b [4]byte
	for _, x := range v {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
		w.Write(b[:])
	}
}
