package compile

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"runtime"
	"sort"
	"sync"

	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/tensor"
)

// afterWeight, when set (by tests), is called after each weight is
// written and dropped.
var afterWeight func(name string)

// writeWeights stores every weight the graph names, in name order: the
// ones src returns quantized in their quantized layout (see
// plan.WeightLayout), the others as plain little-endian float32. It
// reports whether any tensor is quantized.
//
// With pack set, a quantized weight whose shape allows it is stored in its
// packed form (plan.WeightLayout's "-p" tags), which the engine runs with
// int8 activations.
//
// Weights are read and encoded by jobs goroutines (0: one per CPU) and
// written in order; at most jobs of them are held at once, read or
// encoded and waiting for their turn.
func writeWeights(w *artifact.Writer, shapes map[string][]int, src WeightSource, pack bool, jobs int, progress func(Progress)) (bool, error) {
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	if jobs <= 0 {
		jobs = runtime.GOMAXPROCS(0)
	}
	results := make([]chan encoded, len(names))
	for i := range results {
		results[i] = make(chan encoded, 1)
	}
	slots := make(chan struct{}, jobs) // weights launched and not yet written
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i, n := range names {
			select {
			case slots <- struct{}{}:
			case <-stop:
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] <- encodeWeight(n, shapes[n], src, pack)
			}()
		}
	}()
	// on an error, wait for the goroutines still reading src: the caller
	// may close what src reads from once this returns
	defer wg.Wait()
	defer close(stop)

	mixed := false
	var written int64
	for i, n := range names {
		e := <-results[i]
		if e.err != nil {
			return false, fmt.Errorf("compile: weight %q: %w", n, e.err)
		}
		var err error
		if e.data != nil {
			mixed = true
			dt := tensor.I8
			if e.half {
				dt = tensor.F16
			}
			err = w.AddTensor(n, dt, e.shape, e.layout, e.data)
			written += int64(len(e.data))
		} else {
			err = w.AddTensorFrom(n, tensor.F32, e.shape, "", 4*int64(len(e.vals)), &f32Reader{v: e.vals})
			written += 4 * int64(len(e.vals))
		}
		if err != nil {
			return false, fmt.Errorf("compile: weight %q: %w", n, err)
		}
		<-slots
		if afterWeight != nil {
			afterWeight(n)
		}
		if progress != nil {
			progress(Progress{Done: i + 1, Total: len(names), Name: n, Bytes: written})
		}
	}
	return mixed, nil
}

// encoded is one weight ready to write: quantized bytes in a layout, or
// float32 values.
type encoded struct {
	shape  []int64
	layout string
	data   []byte    // quantized layout
	half   bool      // data is binary16 rows (dtype f16), else i8 parts
	vals   []float32 // float32 (data == nil)
	err    error
}

// encodeWeight reads the weight name of the given shape from src and lays
// it out for the artifact.
func encodeWeight(name string, shape []int, src WeightSource, pack bool) encoded {
	e := encoded{shape: make([]int64, len(shape))}
	n := 1
	for i, d := range shape {
		e.shape[i] = int64(d)
		n *= d
	}
	wt, err := src.Weight(name)
	if wt.Release != nil {
		defer wt.Release()
	}
	if err != nil {
		e.err = err
		return e
	}
	if q := wt.Quantized; q != nil {
		if q.Scheme.Kind == quant.KindF16 && wt.F16Rows {
			e.layout, e.half = plan.WeightLayout{Kind: plan.LayoutF16}.Tag(), true
			e.data, e.err = encodeF16Rows(q, e.shape)
			return e
		}
		if q6 := (plan.WeightLayout{Kind: plan.LayoutQ6K, Packed: true}); q.Scheme.Kind == quant.KindQ6K && pack && len(e.shape) == 2 && q6.CanPack(e.shape[1]) {
			e.layout = q6.Tag()
			e.data, e.err = encodeQ6K(q6, q, e.shape)
			return e
		}
		if l, ok := layoutOf(q.Scheme); ok {
			encode := encodeQuantized
			k4 := plan.WeightLayout{Kind: plan.LayoutQ4K, Block: plan.PackBlock, Packed: true}
			switch {
			case q.K4 != nil && pack && len(e.shape) == 2 && k4.CanPack(e.shape[1]):
				l, encode = k4, encodeQ4K
			case pack && len(e.shape) == 2 && l.CanPack(e.shape[1]):
				l.Packed, encode = true, encodePacked
			}
			e.layout = l.Tag()
			e.data, e.err = encode(l, q, e.shape)
			return e
		}
		if wt.Values == nil {
			wt.Values = q.Dequantize()
		}
	}
	if len(wt.Values) != n {
		e.err = fmt.Errorf("%d values, the graph says shape %v", len(wt.Values), shape)
		return e
	}
	e.vals = wt.Values
	return e
}

// f32Reader reads float32 values as little-endian bytes, converting a
// chunk at a time (no copy of the whole tensor).
type f32Reader struct {
	v    []float32
	buf  []byte // converted bytes not yet read
	back []byte // buf's storage
}

func (r *f32Reader) Read(p []byte) (int, error) {
	if len(r.buf) == 0 {
		if len(r.v) == 0 {
			return 0, io.EOF
		}
		k := min(len(r.v), 1<<14)
		if r.back == nil {
			r.back = make([]byte, 4<<14)
		}
		r.buf = r.back[:4*k]
		for i, x := range r.v[:k] {
			binary.LittleEndian.PutUint32(r.buf[4*i:], math.Float32bits(x))
		}
		r.v = r.v[k:]
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// layoutOf returns the artifact layout of a scheme; f16 has none (such
// tensors are stored as float32, which holds every f16 value exactly).
func layoutOf(s quant.Scheme) (plan.WeightLayout, bool) {
	switch s.Kind {
	case quant.KindW8:
		return plan.WeightLayout{Kind: plan.LayoutW8}, true
	case quant.KindLPBQ:
		return plan.WeightLayout{Kind: plan.LayoutLPBQ, Block: s.Block}, true
	case quant.KindQ4:
		return plan.WeightLayout{Kind: plan.LayoutQ4, Block: s.Block, Sym: s.Sym}, true
	case quant.KindQ4K:
		return plan.WeightLayout{Kind: plan.LayoutQ4, Block: s.Block}, true
	}
	return plan.WeightLayout{}, false
}

// partsOf returns where the parts of q lie in layout l, after checking
// that q has the shape the graph gives it.
func partsOf(l plan.WeightLayout, q *quant.Quantized, shape []int64) (plan.Parts, error) {
	if len(shape) != 2 || shape[0] != int64(q.Rows) || shape[1] != int64(q.Cols) {
		return plan.Parts{}, fmt.Errorf("quantized as [%d, %d], the graph says %v", q.Rows, q.Cols, shape)
	}
	return l.Parts(shape[0], shape[1])
}

// encodeQuantized lays q out as l describes, after checking that its parts
// have the sizes the shape implies.
func encodeQuantized(l plan.WeightLayout, q *quant.Quantized, shape []int64) ([]byte, error) {
	p, err := partsOf(l, q, shape)
	if err != nil {
		return nil, err
	}
	n := int64(q.Rows) * int64(q.Cols)
	if int64(len(q.Q)) != n || int64(len(q.Scales)) != p.NScales {
		return nil, fmt.Errorf("%d integers and %d scales, %s needs %d and %d", len(q.Q), len(q.Scales), l.Tag(), n, p.NScales)
	}
	b := make([]byte, p.Size)
	for i, v := range q.Q {
		b[i] = byte(v)
	}
	if p.Codes >= 0 {
		if len(q.Codes) != q.Rows*q.BlocksPerRow() || q.BlocksPerRow() != (q.Cols+l.Block-1)/l.Block {
			return nil, fmt.Errorf("%d block codes do not fit %s", len(q.Codes), l.Tag())
		}
		copy(b[p.Codes:], q.Codes)
	}
	putFloats(b[p.Scales:], q.Scales)
	if p.Zeros >= 0 {
		if int64(len(q.Zeros)) != p.NScales {
			return nil, fmt.Errorf("%d zero points, %s needs %d", len(q.Zeros), l.Tag(), p.NScales)
		}
		putFloats(b[p.Zeros:], q.Zeros)
	}
	return b, nil
}

// packRows packs the N rows of K integers q, plus offset each (which
// must make them 0..15), two to a byte into the first N*K/2 bytes of b
// (kernel.PackNibbles).
func packRows(b []byte, q []int8, N, K, offset int) error {
	u := make([]uint8, K)
	for n := range N {
		for k, v := range q[n*K : (n+1)*K] {
			c := int(v) + offset
			if c < 0 || c > 15 {
				return fmt.Errorf("row %d input %d: %d does not fit 4 bits", n, k, v)
			}
			u[k] = uint8(c)
		}
		if err := kernel.PackNibbles(b[n*K/2:(n+1)*K/2], u, 1, K); err != nil {
			return fmt.Errorf("row %d: %w", n, err)
		}
	}
	return nil
}

// encodeQ4K lays out q's Q4_K super-blocks (q.K4) as layout q4k-p: the
// 4-bit codes packed as the other packed layouts pack them, then per row
// a record of 16 groups' 6-bit scales and minimums and their two
// super-blocks' d and dmin (kernel.Q4KChunk).
func encodeQ4K(l plan.WeightLayout, q *quant.Quantized, shape []int64) ([]byte, error) {
	p, err := partsOf(l, q, shape)
	if err != nil {
		return nil, err
	}
	N, K := q.Rows, q.Cols
	ng, k4 := K/plan.PackBlock, q.K4
	if len(q.Q) != N*K || len(k4.Sc) != N*ng || len(k4.M) != N*ng || len(k4.D) != N*ng/8 || len(k4.DMin) != N*ng/8 {
		return nil, fmt.Errorf("%d integers, %d scales, %d minimums and %d super-blocks do not fit %s of [%d, %d]",
			len(q.Q), len(k4.Sc), len(k4.M), len(k4.D), l.Tag(), N, K)
	}
	b := make([]byte, p.Size)
	if err := packRows(b, q.Q, N, K, 0); err != nil {
		return nil, err
	}
	nc := (ng + 15) / 16
	rec := b[p.Scales:]
	for n := range N {
		for c := range nc {
			g0, g1 := n*ng+16*c, n*ng+min(16*c+16, ng)
			kernel.Q4KChunk(rec[(n*nc+c)*kernel.Q4KChunkBytes:], k4.Sc[g0:g1], k4.M[g0:g1], k4.D[g0/8:(g1+7)/8], k4.DMin[g0/8:(g1+7)/8])
		}
	}
	return b, nil
}

// encodeQ6K lays out a q6k weight as layout q6k-p: the 6-bit codes
// (q+32) in the planes kernel.PackQ6 writes, then the sub-scales and the
// super-blocks' d.
func encodeQ6K(l plan.WeightLayout, q *quant.Quantized, shape []int64) ([]byte, error) {
	p, err := partsOf(l, q, shape)
	if err != nil {
		return nil, err
	}
	N, K := q.Rows, q.Cols
	if len(q.Q) != N*K || int64(len(q.Sub)) != p.Scales-p.Sub || int64(len(q.Scales)) != p.NScales {
		return nil, fmt.Errorf("%d integers, %d sub-scales and %d scales do not fit %s of [%d, %d]", len(q.Q), len(q.Sub), len(q.Scales), l.Tag(), N, K)
	}
	b := make([]byte, p.Size)
	nib, hi := b[:p.Codes], b[p.Codes:p.Sub]
	u := make([]uint8, K) // one row at a time: a classifier's codes are not copied whole
	for n := range N {
		for k, v := range q.Q[n*K : (n+1)*K] {
			if v < -32 || v > 31 {
				return nil, fmt.Errorf("row %d input %d: %d does not fit 6 bits", n, k, v)
			}
			u[k] = uint8(int(v) + 32)
		}
		if err := kernel.PackQ6(nib[n*K/2:(n+1)*K/2], hi[n*K/4:(n+1)*K/4], u, 1, K); err != nil {
			return nil, fmt.Errorf("row %d: %w", n, err)
		}
	}
	for i, v := range q.Sub {
		b[p.Sub+int64(i)] = byte(v)
	}
	putFloats(b[p.Scales:], q.Scales)
	return b, nil
}

// encodeF16Rows lays out the binary16 values of q (scheme f16) as the
// little-endian rows of layout f16-rows.
func encodeF16Rows(q *quant.Quantized, shape []int64) ([]byte, error) {
	if len(shape) != 2 || shape[0] != int64(q.Rows) || shape[1] != int64(q.Cols) {
		return nil, fmt.Errorf("stored as [%d, %d], the graph says %v", q.Rows, q.Cols, shape)
	}
	if len(q.Half) != q.Rows*q.Cols {
		return nil, fmt.Errorf("%d binary16 values for [%d, %d]", len(q.Half), q.Rows, q.Cols)
	}
	b := make([]byte, 2*len(q.Half))
	for i, h := range q.Half {
		binary.LittleEndian.PutUint16(b[2*i:], h)
	}
	return b, nil
}

func putFloats(b []byte, v []float32) {
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
}

// encodePacked lays q out in l's packed form (l.Packed set): 4-bit codes
// two to a byte, blocks of plan.PackBlock with their B- or G-block's code,
// scale and zero point repeated, or w8 integers offset by 128.
func encodePacked(l plan.WeightLayout, q *quant.Quantized, shape []int64) ([]byte, error) {
	p, err := partsOf(l, q, shape)
	if err != nil {
		return nil, err
	}
	N, K := q.Rows, q.Cols
	nb, per := K/plan.PackBlock, max(l.Block/plan.PackBlock, 1)
	srcBlocks := 0
	if l.Block > 0 {
		srcBlocks = (K + l.Block - 1) / l.Block
	}
	want := int64(N)
	if l.Kind == plan.LayoutQ4 {
		want = int64(N * srcBlocks)
	}
	if len(q.Q) != N*K || int64(len(q.Scales)) != want {
		return nil, fmt.Errorf("%d integers and %d scales, %s needs %d and %d", len(q.Q), len(q.Scales), l.Tag(), N*K, want)
	}
	b := make([]byte, p.Size)
	if l.Kind == plan.LayoutW8 {
		for i, v := range q.Q {
			b[i] = byte(int(v) + 128)
		}
		putFloats(b[p.Scales:], q.Scales)
		return b, nil
	}
	offset := 8
	if l.Kind == plan.LayoutQ4 && !l.Sym {
		offset = 0
	}
	if err := packRows(b, q.Q, N, K, offset); err != nil {
		return nil, err
	}
	// spread repeats each row's per-B-block values over its 32-blocks.
	spread := func(src []float32) []float32 {
		out := make([]float32, N*nb)
		for i := range out {
			out[i] = src[(i/nb)*srcBlocks+(i%nb)/per]
		}
		return out
	}
	switch l.Kind {
	case plan.LayoutLPBQ:
		if len(q.Codes) != N*srcBlocks {
			return nil, fmt.Errorf("%d block codes do not fit %s", len(q.Codes), l.Tag())
		}
		for i := range N * nb {
			b[p.Codes+int64(i)] = q.Codes[(i/nb)*srcBlocks+(i%nb)/per]
		}
		putFloats(b[p.Scales:], q.Scales)
	case plan.LayoutQ4:
		putFloats(b[p.Scales:], spread(q.Scales))
		if p.Zeros >= 0 {
			if len(q.Zeros) != N*srcBlocks {
				return nil, fmt.Errorf("%d zero points, %s needs %d", len(q.Zeros), l.Tag(), N*srcBlocks)
			}
			putFloats(b[p.Zeros:], spread(q.Zeros))
		}
	}
	return b, nil
}
