package quant

import (
	"fmt"
	"math"
)

// The uint8 KV cache stores each K or V value symmetrically around a fixed
// zero point, with a scale chosen once at compile time (from calibration or a
// given clip value) and shared by the past entries and every new one, so the
// cache is never rescaled:
//
//	s  = clip / 127                        one per tensor, or one per head
//	u  = clamp(round(x / s), -127, 127) + 128     stored uint8, 1..255
//	x' = float32(int(u) - 128) * s
//
// |x - x'| <= s/2 for |x| <= clip; larger values saturate at +-clip. The byte
// 0 is never written, keeping the range symmetric. A zero clip gives s = 0:
// everything is stored as 128 and reads back as 0.

// KVZeroPoint is the stored byte of the value 0.
const KVZeroPoint = 128

// KVQuant holds the fixed parameters of one uint8 K or V cache. A cache row
// (one token) is [H, D] = Heads*HeadDim values.
type KVQuant struct {
	Heads   int       // H
	HeadDim int       // D
	Scales  []float32 // [1] per tensor, or [H] per head
}

// NewKVQuant returns the parameters for clip values: one clip (per tensor) or
// one per head. Clips must be finite and non-negative.
func NewKVQuant(heads, headDim int, clip []float32) (*KVQuant, error) {
	if heads < 1 || headDim < 1 {
		return nil, fmt.Errorf("quant: kv u8: bad shape [%d heads, %d dims]", heads, headDim)
	}
	if len(clip) != 1 && len(clip) != heads {
		return nil, fmt.Errorf("quant: kv u8: %d clip values for %d heads (want 1 or %d)", len(clip), heads, heads)
	}
	k := &KVQuant{Heads: heads, HeadDim: headDim, Scales: make([]float32, len(clip))}
	for i, c := range clip {
		if !(c >= 0) || math.IsInf(float64(c), 0) {
			return nil, fmt.Errorf("quant: kv u8: clip[%d] = %v is not a finite non-negative value", i, c)
		}
		k.Scales[i] = float32(float64(c) / 127)
	}
	return k, nil
}

// PerHead reports whether each head has its own scale.
func (k *KVQuant) PerHead() bool { return len(k.Scales) > 1 }

// scale returns the scale of head h.
func (k *KVQuant) scale(h int) float32 {
	if len(k.Scales) == 1 {
		return k.Scales[0]
	}
	return k.Scales[h]
}

func (k *KVQuant) checkLen(n int, what string) error {
	row := k.Heads * k.HeadDim
	if len(k.Scales) != 1 && len(k.Scales) != k.Heads {
		return fmt.Errorf("quant: kv u8: %d scales for %d heads", len(k.Scales), k.Heads)
	}
	if row <= 0 || n%row != 0 {
		return fmt.Errorf("quant: kv u8: %s of %d values is not whole rows of %d", what, n, row)
	}
	return nil
}

// Quantize stores src (whole rows [T, H, D]) into dst, which must have the
// same length. NaN is stored as the zero point.
func (k *KVQuant) Quantize(dst []uint8, src []float32) error {
	if len(dst) != len(src) {
		return fmt.Errorf("quant: kv u8: quantize %d values into %d bytes", len(src), len(dst))
	}
	if err := k.checkLen(len(src), "input"); err != nil {
		return err
	}
	for i := 0; i < len(src); i += k.HeadDim {
		s := k.scale(i / k.HeadDim % k.Heads)
		out, in := dst[i:i+k.HeadDim], src[i:i+k.HeadDim]
		if s == 0 {
			for j := range out {
				out[j] = KVZeroPoint
			}
			continue
		}
		for j, x := range in {
			out[j] = uint8(roundClamp(float64(x/s), -127, 127) + KVZeroPoint)
		}
	}
	return nil
}

// Dequantize reads src (whole rows [T, H, D] of stored bytes) into dst, which
// must have the same length.
func (k *KVQuant) Dequantize(dst []float32, src []uint8) error {
	if len(dst) != len(src) {
		return fmt.Errorf("quant: kv u8: dequantize %d bytes into %d values", len(src), len(dst))
	}
	if err := k.checkLen(len(src), "input"); err != nil {
		return err
	}
	for i := 0; i < len(src); i += k.HeadDim {
		s := k.scale(i / k.HeadDim % k.Heads)
		out, in := dst[i:i+k.HeadDim], src[i:i+k.HeadDim]
		for j, u := range in {
			out[j] = float32(int32(u)-KVZeroPoint) * s
		}
	}
	return nil
}

// KVCalibrator collects per-head max |x| over calibration rows of one K or V
// cache, from which Params derives the clip values.
type KVCalibrator struct {
	heads, headDim int
	amax           []float64 // [H]
	rows           int
}

// NewKVCalibrator returns an empty calibrator for rows of [heads, headDim].
func NewKVCalibrator(heads, headDim int) (*KVCalibrator, error) {
	if heads < 1 || headDim < 1 {
		return nil, fmt.Errorf("quant: kv u8: bad shape [%d heads, %d dims]", heads, headDim)
	}
	return &KVCalibrator{heads: heads, headDim: headDim, amax: make([]float64, heads)}, nil
}

// Observe adds whole rows [T, H, D] to the statistics. Non-finite values are
// refused.
func (c *KVCalibrator) Observe(rows []float32) error {
	row := c.heads * c.headDim
	if len(rows)%row != 0 {
		return fmt.Errorf("quant: kv u8: observe %d values, not whole rows of %d", len(rows), row)
	}
	for i, x := range rows {
		a := math.Abs(float64(x))
		if math.IsNaN(a) || math.IsInf(a, 0) {
			return fmt.Errorf("quant: kv u8: observed value %d is %v", i, x)
		}
		h := i / c.headDim % c.heads
		c.amax[h] = max(c.amax[h], a)
	}
	c.rows += len(rows) / row
	return nil
}

// Rows returns the number of rows observed.
func (c *KVCalibrator) Rows() int { return c.rows }

// Params returns the parameters with clip = the observed max |x|, per head or
// (the max over heads) per tensor.
func (c *KVCalibrator) Params(perHead bool) (*KVQuant, error) {
	var clip []float32
	if perHead {
		clip = make([]float32, c.heads)
		for h, a := range c.amax {
			clip[h] = float32(a)
		}
	} else {
		var m float64
		for _, a := range c.amax {
			m = max(m, a)
		}
		clip = []float32{float32(m)}
	}
	return NewKVQuant(c.heads, c.headDim, clip)
}
