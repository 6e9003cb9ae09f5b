package engine

import (
	"fmt"
	"unsafe"

	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/tensor"
)

// qweight is a quantized weight W [N, K] viewed in place in the artifact
// (plan.WeightLayout gives the byte layout and the dequantization rule).
type qweight struct {
	kind   plan.LayoutKind
	N, K   int
	block  int       // B or G; 0 for w8
	nb     int       // blocks (groups) per row
	q      []int8    // [N*K]
	codes  []uint8   // [N*nb] lpbq
	scales []float32 // [N] (w8, lpbq) or [N*nb] (q4)
	zeros  []float32 // [N*nb] q4 asymmetric, else nil
	// A packed weight (layout tag "-p") is one of these instead.
	q4 *kernel.Q4
	w8 *kernel.W8
	q6 *kernel.Q6
	// A binary16 weight (layout f16-rows) is h [N*K] instead.
	h []uint16
}

// packed reports whether w is in a packed layout.
func (w *qweight) packed() bool { return w.q4 != nil || w.w8 != nil || w.q6 != nil }

// newQWeight checks a quantized tensor's descriptor and size and views its
// parts.
func newQWeight(info artifact.TensorInfo, data []byte) (*qweight, error) {
	l, err := plan.ParseLayout(info.Layout)
	if err != nil {
		return nil, &UnsupportedError{Msg: fmt.Sprintf("tensor %q: %v", info.Name, err)}
	}
	want := tensor.I8
	if l.Half() {
		want = tensor.F16
	}
	if info.DType != want || len(info.Shape) != 2 {
		return nil, fmt.Errorf("tensor %q: layout %s needs dtype %v and rank 2, has %v %v", info.Name, info.Layout, want, info.DType, info.Shape)
	}
	p, err := l.Parts(info.Shape[0], info.Shape[1])
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", info.Name, err)
	}
	if int64(len(data)) != p.Size {
		return nil, fmt.Errorf("tensor %q: %d bytes, layout %s of %v needs %d", info.Name, len(data), info.Layout, info.Shape, p.Size)
	}
	w := &qweight{kind: l.Kind, N: int(info.Shape[0]), K: int(info.Shape[1]), block: l.Block}
	if l.Half() {
		w.h = unsafe.Slice((*uint16)(unsafe.Pointer(&data[0])), w.N*w.K)
		return w, nil
	}
	if l.Packed {
		return w, w.viewPacked(info.Name, p, data)
	}
	if l.Block > 0 {
		w.nb = (w.K + l.Block - 1) / l.Block
	}
	n := w.N * w.K
	w.q = unsafe.Slice((*int8)(unsafe.Pointer(&data[0])), n)
	if p.Codes >= 0 {
		w.codes = data[p.Codes : p.Codes+int64(w.N*w.nb)]
	}
	w.scales = floats(data[p.Scales : p.Scales+4*p.NScales])
	if p.Zeros >= 0 {
		w.zeros = floats(data[p.Zeros : p.Zeros+4*p.NScales])
	}
	return w, nil
}

// row writes the dequantized row n of w into dst [K]:
//
//	w8    dst[k] = float32(q[n][k]) * s[n]
//	lpbq  dst[k] = float32(int32(q[n][k]) * int32(codes[n][k/B])) * S[n]
//	q4    dst[k] = (float32(q[n][k]) - z[n][k/G]) * s[n][k/G]   (z = 0 when sym)
func (w *qweight) row(dst []float32, n int) {
	switch {
	case w.q4 != nil:
		w.q4.Row(dst, n)
		return
	case w.w8 != nil:
		w.w8.Row(dst, n)
		return
	case w.q6 != nil:
		w.q6.Row(dst, n)
		return
	case w.h != nil:
		for k, v := range w.h[n*w.K : (n+1)*w.K] {
			dst[k] = tensor.F16ToF32(v)
		}
		return
	}
	qr := w.q[n*w.K : (n+1)*w.K]
	switch w.kind {
	case plan.LayoutW8:
		s := w.scales[n]
		for k, v := range qr {
			dst[k] = float32(v) * s
		}
	case plan.LayoutLPBQ:
		s := w.scales[n]
		for k, v := range qr {
			dst[k] = float32(int32(v)*int32(w.codes[n*w.nb+k/w.block])) * s
		}
	case plan.LayoutQ4:
		for k, v := range qr {
			g := n*w.nb + k/w.block
			var z float32
			if w.zeros != nil {
				z = w.zeros[g]
			}
			dst[k] = (float32(v) - z) * w.scales[g]
		}
	}
}

// runQ is linearJob.run over a quantized weight: each weight is
// dequantized in the loop by the rule of qweight.row (explicit float32
// conversions keep it from fusing with the accumulation), so the sums
// equal those of the float32 kernel over the dequantized matrix, in the
// same k order.
func (l *linearJob) runQ(j0, j1 int) {
	w, K, N := l.qw, l.K, l.N
	for t := 0; t < l.T; t++ {
		xr := l.x[t*K : (t+1)*K]
		for j := j0; j < j1; j++ {
			qr := w.q[j*K : (j+1)*K]
			var s float32
			switch w.kind {
			case plan.LayoutW8:
				sc := w.scales[j]
				for k, xv := range xr {
					s += float32(float32(qr[k])*sc) * xv
				}
			case plan.LayoutLPBQ:
				sc := w.scales[j]
				for b := 0; b < w.nb; b++ {
					code := int32(w.codes[j*w.nb+b])
					k1 := min((b+1)*w.block, K)
					for k := b * w.block; k < k1; k++ {
						s += float32(float32(int32(qr[k])*code)*sc) * xr[k]
					}
				}
			case plan.LayoutQ4:
				for b := 0; b < w.nb; b++ {
					g := j*w.nb + b
					sc := w.scales[g]
					var z float32
					if w.zeros != nil {
						z = w.zeros[g]
					}
					k1 := min((b+1)*w.block, K)
					for k := b * w.block; k < k1; k++ {
						s += float32((float32(qr[k])-z)*sc) * xr[k]
					}
				}
			}
			if l.b != nil {
				s += l.b[j]
			}
			l.dst[t*N+j] = s
		}
	}
}
