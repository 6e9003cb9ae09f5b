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
		if ws, ok := weightSchemes[q.Scheme.Kind]; ok {
			// a weight the recipe keeps at float input stays unpacked
			if l, encode, ok := ws.layout(wt, e.shape, pack && !q.Scheme.FloatInput); ok {
				e.layout, e.half = l.Tag(), l.Half()
				e.data, e.err = encode(l, q, e.shape)
				return e
			}
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

func putFloats(b []byte, v []float32) {
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
}

// packedBlocks checks q against l's packed form and returns the packed
// tensor's parts, its buffer, and the number of the scheme's own blocks
// per row (srcBlocks) and of packed blocks per scheme block (per).
func packedBlocks(l plan.WeightLayout, q *quant.Quantized, shape []int64, scalesPerBlock bool) (p plan.Parts, b []byte, srcBlocks, per int, err error) {
	p, err = partsOf(l, q, shape)
	if err != nil {
		return p, nil, 0, 0, err
	}
	N, K := q.Rows, q.Cols
	per = max(l.Block/plan.PackBlock, 1)
	if l.Block > 0 {
		srcBlocks = (K + l.Block - 1) / l.Block
	}
	want := int64(N)
	if scalesPerBlock {
		want = int64(N * srcBlocks)
	}
	if len(q.Q) != N*K || int64(len(q.Scales)) != want {
		return p, nil, 0, 0, fmt.Errorf("%d integers and %d scales, %s needs %d and %d", len(q.Q), len(q.Scales), l.Tag(), N*K, want)
	}
	return p, make([]byte, p.Size), srcBlocks, per, nil
}

// spreadBlocks repeats each row's per-block values src ([N][srcBlocks])
// over its packed blocks of plan.PackBlock ([N][K/PackBlock]), per of
// them to a block.
func spreadBlocks[T any](src []T, N, K, srcBlocks, per int) []T {
	nb := K / plan.PackBlock
	out := make([]T, N*nb)
	for i := range out {
		out[i] = src[(i/nb)*srcBlocks+(i%nb)/per]
	}
	return out
}
