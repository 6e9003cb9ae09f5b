package vision

import "image"

// JPEG color conversion as llama.cpp's image loader (stb_image) does it,
// so that a JPEG gives the pixels llama.cpp encodes. Go's image/jpeg
// returns the decoded Y, Cb, Cr planes; image.YCbCr's own conversion
// repeats each subsampled chroma sample (nearest neighbour) and rounds
// differently, which moves pixels at color edges by up to ~120 levels
// against stb_image. Here the chroma planes are upsampled with the
// triangle ("fancy") filter of libjpeg: each output sample weighs the
// nearest input sample 3/4 and the next one 1/4 in each subsampled
// direction (9/16, 3/16, 3/16, 1/16 for 4:2:0), and YCbCr becomes RGB in
// 20-bit fixed point with the JFIF coefficients rounded to 12 bits.
// What remains between the two decoders is their inverse DCTs, which
// round differently (a level or two; see docs/architectures.md).

// jfix is a JFIF coefficient in the 20-bit fixed point of the conversion:
// rounded to 1/4096, shifted left by 8.
func jfix(x float32) int32 { return int32(x*4096+0.5) << 8 }

var (
	jCrR = jfix(1.40200)
	jCrG = -jfix(0.71414)
	jCbG = -jfix(0.34414)
	jCbB = jfix(1.77200)
)

// ycbcrPixel converts one full-resolution sample to RGB.
func ycbcrPixel(y, cb, cr uint8) (r, g, b uint8) {
	yf := int32(y)<<20 + 1<<19
	icr, icb := int32(cr)-128, int32(cb)-128
	ri := yf + icr*jCrR
	gi := yf + icr*jCrG + int32(uint32(icb*jCbG)&0xffff0000)
	bi := yf + icb*jCbB
	return clamp8(ri >> 20), clamp8(gi >> 20), clamp8(bi >> 20)
}

func clamp8(v int32) uint8 {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}

// jpegToRGB converts a decoded JPEG's planes to RGB. Ratios other than
// 4:4:4, 4:2:2, 4:2:0 and 4:4:0 repeat chroma samples (as stb_image does
// for them).
func jpegToRGB(m *image.YCbCr) *RGB {
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	hs, vs := 1, 1
	switch m.SubsampleRatio {
	case image.YCbCrSubsampleRatio422:
		hs = 2
	case image.YCbCrSubsampleRatio420:
		hs, vs = 2, 2
	case image.YCbCrSubsampleRatio440:
		vs = 2
	case image.YCbCrSubsampleRatio444:
	default:
		return nearestChroma(m)
	}
	// chroma plane size as the decoder laid it out
	cw, ch := (w+hs-1)/hs, (h+vs-1)/vs
	crow := func(plane []uint8, r int) []uint8 {
		o := r * m.CStride
		return plane[o : o+cw]
	}
	out := NewRGB(w, h)
	cb, cr := make([]uint8, cw*hs+1), make([]uint8, cw*hs+1)
	for y := 0; y < h; y++ {
		// the chroma row nearest to this output row, and the other one
		// the triangle filter mixes in (clamped at the edges)
		near, far := y, y
		if vs == 2 {
			near = y / 2
			if y%2 == 0 {
				far = max(near-1, 0)
			} else {
				far = min(near+1, ch-1)
			}
		}
		upsampleRow(cb, crow(m.Cb, near), crow(m.Cb, far), hs, vs)
		upsampleRow(cr, crow(m.Cr, near), crow(m.Cr, far), hs, vs)
		yrow := m.Y[y*m.YStride:]
		o := out.Pix[3*y*w:]
		for x := 0; x < w; x++ {
			o[3*x], o[3*x+1], o[3*x+2] = ycbcrPixel(yrow[x], cb[x], cr[x])
		}
	}
	return out
}

// upsampleRow writes one full-resolution chroma row into dst from the
// nearest subsampled row and its vertical neighbour far.
func upsampleRow(dst, near, far []uint8, hs, vs int) {
	n := len(near)
	switch {
	case hs == 1 && vs == 1:
		copy(dst, near)
	case hs == 1: // vertical only
		for i := 0; i < n; i++ {
			dst[i] = uint8((3*int(near[i]) + int(far[i]) + 2) >> 2)
		}
	case vs == 1: // horizontal only
		if n == 1 {
			dst[0], dst[1] = near[0], near[0]
			return
		}
		dst[0] = near[0]
		dst[1] = uint8((3*int(near[0]) + int(near[1]) + 2) >> 2)
		for i := 1; i < n-1; i++ {
			c := 3*int(near[i]) + 2
			dst[2*i] = uint8((c + int(near[i-1])) >> 2)
			dst[2*i+1] = uint8((c + int(near[i+1])) >> 2)
		}
		// stb_image weighs the second-to-last output 3/4 on the sample
		// before the last one (libjpeg: 3/4 on the last); kept as it is
		dst[2*n-2] = uint8((3*int(near[n-2]) + int(near[n-1]) + 2) >> 2)
		dst[2*n-1] = near[n-1]
	default: // both: the column sums t = 3*near + far, then the same in x
		if n == 1 {
			v := uint8((3*int(near[0]) + int(far[0]) + 2) >> 2)
			dst[0], dst[1] = v, v
			return
		}
		t1 := 3*int(near[0]) + int(far[0])
		dst[0] = uint8((t1 + 2) >> 2)
		for i := 1; i < n; i++ {
			t0 := t1
			t1 = 3*int(near[i]) + int(far[i])
			dst[2*i-1] = uint8((3*t0 + t1 + 8) >> 4)
			dst[2*i] = uint8((3*t1 + t0 + 8) >> 4)
		}
		dst[2*n-1] = uint8((t1 + 2) >> 2)
	}
}

// nearestChroma converts with each chroma sample repeated over the pixels
// it covers.
func nearestChroma(m *image.YCbCr) *RGB {
	b := m.Bounds()
	out := NewRGB(b.Dx(), b.Dy())
	for y := 0; y < out.H; y++ {
		for x := 0; x < out.W; x++ {
			yi, ci := m.YOffset(b.Min.X+x, b.Min.Y+y), m.COffset(b.Min.X+x, b.Min.Y+y)
			i := 3 * (y*out.W + x)
			out.Pix[i], out.Pix[i+1], out.Pix[i+2] = ycbcrPixel(m.Y[yi], m.Cb[ci], m.Cr[ci])
		}
	}
	return out
}
