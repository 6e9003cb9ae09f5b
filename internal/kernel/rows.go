package kernel

import (
	"fmt"
	"unsafe"

	"github.com/aotlm/aotlm/internal/tensor"
)

// The row kernels of attention over a transposed KV cache: R rows of n
// elements, row r starting at r*stride of one slice (stride >= 0, in
// elements; rows may overlap). One call covers all rows, so the
// per-call overhead of R calls of Axpy or Dot is paid once.

// rowsSpan returns the elements rows rows of n elements at stride
// cover, (rows-1)*stride + n, 0 when either is 0. A negative stride, a
// span past the int range or past have (the strided slice's length) is
// a broken invariant of the caller: it panics before any work.
func rowsSpan(op string, rows, n, stride, have int) int {
	if rows == 0 || n == 0 {
		return 0
	}
	if stride < 0 || (stride > 0 && rows-1 > (maxInt-n)/stride) {
		panic(fmt.Sprintf("kernel: %s: stride %d for %d rows of %d elements", op, stride, rows, n))
	}
	s := (rows-1)*stride + n
	if have < s {
		panic(fmt.Sprintf("kernel: %s: %d rows of %d elements at stride %d need %d elements, have %d", op, rows, n, stride, s, have))
	}
	return s
}

const maxInt = int(^uint(0) >> 1)

// AxpyRows sets dst[j] += Σ_r alpha[r] * x[r*stride + j] for
// j < len(dst), r < len(alpha): dst [n], alpha [R], x [(R-1)*stride+n].
// A short x panics before anything is written.
func AxpyRows(dst, alpha, x []float32, stride int) {
	s := rowsSpan("AxpyRows", len(alpha), len(dst), stride, len(x))
	if s == 0 {
		return
	}
	axpyRowsImpl(dst, alpha, x[:s], stride)
}

func axpyRowsGeneric(dst, alpha, x []float32, stride int) {
	if len(dst) == 0 {
		return
	}
	for r, a := range alpha {
		row := x[r*stride : r*stride+len(dst)]
		for j, v := range row {
			dst[j] += a * v
		}
	}
}

// DotRows sets dst[r] = Σ_j w[j] * y[r*stride + j] for r < len(dst),
// j < len(w): dst [R], w [n], y [(R-1)*stride+n]. With n == 0 every
// dst[r] is 0. A short y panics before anything is written.
func DotRows(dst, w, y []float32, stride int) {
	s := rowsSpan("DotRows", len(dst), len(w), stride, len(y))
	if s == 0 {
		clear(dst)
		return
	}
	dotRowsImpl(dst, w, y[:s], stride)
}

func dotRowsGeneric(dst, w, y []float32, stride int) {
	if len(w) == 0 {
		clear(dst)
		return
	}
	for r := range dst {
		row := y[r*stride : r*stride+len(w)]
		var s float32
		for j, v := range row {
			s += w[j] * v
		}
		dst[r] = s
	}
}

// AxpyRowsF16 is AxpyRows on IEEE binary16 rows x.
func AxpyRowsF16(dst, alpha []float32, x []uint16, stride int) {
	s := rowsSpan("AxpyRowsF16", len(alpha), len(dst), stride, len(x))
	if s == 0 {
		return
	}
	axpyRowsF16Impl(dst, alpha, x[:s], stride)
}

func axpyRowsF16Generic(dst, alpha []float32, x []uint16, stride int) {
	if len(dst) == 0 {
		return
	}
	for r, a := range alpha {
		row := x[r*stride : r*stride+len(dst)]
		for j, v := range row {
			dst[j] += a * tensor.F16ToF32(v)
		}
	}
}

// DotRowsF16 is DotRows on IEEE binary16 rows y.
func DotRowsF16(dst, w []float32, y []uint16, stride int) {
	s := rowsSpan("DotRowsF16", len(dst), len(w), stride, len(y))
	if s == 0 {
		clear(dst)
		return
	}
	dotRowsF16Impl(dst, w, y[:s], stride)
}

func dotRowsF16Generic(dst, w []float32, y []uint16, stride int) {
	if len(w) == 0 {
		clear(dst)
		return
	}
	for r := range dst {
		row := y[r*stride : r*stride+len(w)]
		var s float32
		for j, v := range row {
			s += w[j] * tensor.F16ToF32(v)
		}
		dst[r] = s
	}
}

// DotRowsF16W is DotRows with a binary16 w and float32 rows y:
// dst[r] = Σ_j f16(w[j]) * y[r*stride + j]. It is the product of a
// linear whose weights are stored as binary16 rows (w, one weight row)
// with the R input rows y, each weight element read and widened once
// for all of them. A short y panics before anything is written.
func DotRowsF16W(dst []float32, w []uint16, y []float32, stride int) {
	s := rowsSpan("DotRowsF16W", len(dst), len(w), stride, len(y))
	if s == 0 {
		clear(dst)
		return
	}
	dotRowsF16WImpl(dst, w, y[:s], stride)
}

func dotRowsF16WGeneric(dst []float32, w []uint16, y []float32, stride int) {
	if len(w) == 0 {
		clear(dst)
		return
	}
	for r := range dst {
		row := y[r*stride : r*stride+len(w)]
		var s float32
		for j, v := range row {
			s += tensor.F16ToF32(w[j]) * v
		}
		dst[r] = s
	}
}

// U8Bias is the stored byte of 0 in the uint8 rows of AxpyRowsU8 and
// DotRowsU8: a byte u stands for the integer u - U8Bias (-128..127).
const U8Bias = 128

// AxpyRowsU8 is AxpyRows on rows x of biased bytes: x[i] stands for
// int(x[i]) - 128 (the uint8 KV cache's codes, before their scale).
func AxpyRowsU8(dst, alpha []float32, x []uint8, stride int) {
	s := rowsSpan("AxpyRowsU8", len(alpha), len(dst), stride, len(x))
	if s == 0 {
		return
	}
	axpyRowsU8Impl(dst, alpha, x[:s], stride)
}

// axpyRowsU8Generic and dotRowsU8Generic spell the loops out (no decode
// call per element): they are what arm64 runs for a uint8 KV cache.
func axpyRowsU8Generic(dst, alpha []float32, x []uint8, stride int) {
	if len(dst) == 0 {
		return
	}
	for r, a := range alpha {
		row := x[r*stride : r*stride+len(dst)]
		for j, v := range row {
			dst[j] += a * float32(int32(v)-U8Bias)
		}
	}
}

// DotRowsU8 is DotRows on rows y of biased bytes (see AxpyRowsU8).
func DotRowsU8(dst, w []float32, y []uint8, stride int) {
	s := rowsSpan("DotRowsU8", len(dst), len(w), stride, len(y))
	if s == 0 {
		clear(dst)
		return
	}
	dotRowsU8Impl(dst, w, y[:s], stride)
}

func dotRowsU8Generic(dst, w []float32, y []uint8, stride int) {
	if len(w) == 0 {
		clear(dst)
		return
	}
	for r := range dst {
		row := y[r*stride : r*stride+len(w)]
		var s float32
		for j, v := range row {
			s += w[j] * float32(int32(v)-U8Bias)
		}
		dst[r] = s
	}
}

// RowsMulti reports whether the selected kernels have multi-vector forms
// of the binary16 and uint8 row kernels (AxpyRowsF16Multi and the
// others then widen each cache element once for all their vectors),
// whose one- and multi-vector sums do not depend on the length n.
func RowsMulti() bool {
	return axpyRowsMF16Impl[2] != nil && dotRowsMF16Impl[2] != nil && axpyRowsMU8Impl[2] != nil && dotRowsMU8Impl[2] != nil
}

// multiElem is the element type of a cache whose row kernels have
// multi-vector forms: binary16 or biased bytes.
type multiElem interface{ uint16 | uint8 }

// AxpyRowsF16Multi runs AxpyRowsF16(dst[i*ldd:i*ldd+n],
// alpha[i*lda:i*lda+rows], x, stride) for each i < m: several vectors
// of coefficients (attention's queries of one key/value head) against
// the same rows. Each result is bit-identical to that call's; an overlay
// with a form for several vectors widens each row of x once for all of
// them. Spans past a slice panic before anything is written.
func AxpyRowsF16Multi(dst []float32, ldd, n int, alpha []float32, lda, rows, m int, x []uint16, stride int) {
	axpyRowsMulti(&axpyF16Names, &axpyRowsMF16Impl, axpyRowsF16Impl, dst, ldd, n, alpha, lda, rows, m, x, stride)
}

// AxpyRowsU8Multi is AxpyRowsF16Multi on rows of biased bytes
// (AxpyRowsU8).
func AxpyRowsU8Multi(dst []float32, ldd, n int, alpha []float32, lda, rows, m int, x []uint8, stride int) {
	axpyRowsMulti(&axpyU8Names, &axpyRowsMU8Impl, axpyRowsU8Impl, dst, ldd, n, alpha, lda, rows, m, x, stride)
}

// DotRowsF16Multi runs DotRowsF16(dst[i*ldd:i*ldd+rows],
// w[i*ldw:i*ldw+n], y, stride) for each i < m, each result bit-identical
// to that call's, as AxpyRowsF16Multi.
//
// Where RowsMulti reports true, a w whose last elements are zero gives
// the sums its shorter prefix gives (0 times a finite element adds
// nothing), and AxpyRowsF16Multi's first columns do not depend on n, so
// vectors of different lengths may share one call; elsewhere (the
// one-vector kernels of AVX2 and NEON finish their last elements apart)
// they may differ in the last bits.
func DotRowsF16Multi(dst []float32, ldd, rows int, w []float32, ldw, n, m int, y []uint16, stride int) {
	dotRowsMulti(&dotF16Names, &dotRowsMF16Impl, dotRowsF16Impl, dst, ldd, rows, w, ldw, n, m, y, stride)
}

// DotRowsU8Multi is DotRowsF16Multi on rows of biased bytes
// (DotRowsU8).
func DotRowsU8Multi(dst []float32, ldd, rows int, w []float32, ldw, n, m int, y []uint8, stride int) {
	dotRowsMulti(&dotU8Names, &dotRowsMU8Impl, dotRowsU8Impl, dst, ldd, rows, w, ldw, n, m, y, stride)
}

// DotRowsF16MultiAhead is DotRowsF16Multi, bit for bit, that also asks
// for next to be brought into the caches: rows laid out as y's (the same
// stride), such as the value rows that attention reads after its key
// pass. Where the kernels can (AVX-512), each line of next is asked for
// as the line at the same place in y is read, so that next arrives from
// memory while y's rows are summed; elsewhere, or when next is shorter
// than y's rows span, next is asked for all at once before.
func DotRowsF16MultiAhead(dst []float32, ldd, rows int, w []float32, ldw, n, m int, y []uint16, stride int, next []uint16) {
	dotRowsMultiAhead(&dotF16Names, &dotRowsMF16Impl, &dotRowsAF16Impl, dotRowsF16Impl, dst, ldd, rows, w, ldw, n, m, y, stride, next)
}

// DotRowsU8MultiAhead is DotRowsF16MultiAhead on rows of biased bytes
// (DotRowsU8Multi).
func DotRowsU8MultiAhead(dst []float32, ldd, rows int, w []float32, ldw, n, m int, y []uint8, stride int, next []uint8) {
	dotRowsMultiAhead(&dotU8Names, &dotRowsMU8Impl, &dotRowsAU8Impl, dotRowsU8Impl, dst, ldd, rows, w, ldw, n, m, y, stride, next)
}

// AxpyRowsF16MultiAhead is AxpyRowsF16Multi, bit for bit, that also
// asks for next to be brought into the caches as it reads x: rows laid
// out as x's (the same stride), such as the key rows of the next
// key/value head that a decode step reads after this head's value pass.
// Where the kernels can (AVX-512, 2-4 vectors), the first line of each
// row's column block of next is asked for as the same place in x is
// read; elsewhere, or when next is shorter than x's rows span, nothing
// is asked for.
func AxpyRowsF16MultiAhead(dst []float32, ldd, n int, alpha []float32, lda, rows, m int, x []uint16, stride int, next []uint16) {
	axpyRowsMultiAhead(&axpyF16Names, &axpyRowsMF16Impl, &axpyRowsAF16Impl, axpyRowsF16Impl, dst, ldd, n, alpha, lda, rows, m, x, stride, next)
}

// AxpyRowsU8MultiAhead is AxpyRowsF16MultiAhead on rows of biased bytes
// (AxpyRowsU8Multi).
func AxpyRowsU8MultiAhead(dst []float32, ldd, n int, alpha []float32, lda, rows, m int, x []uint8, stride int, next []uint8) {
	axpyRowsMultiAhead(&axpyU8Names, &axpyRowsMU8Impl, &axpyRowsAU8Impl, axpyRowsU8Impl, dst, ldd, n, alpha, lda, rows, m, x, stride, next)
}

// axpyRowsMultiAhead runs the overlay's axpy kernels that ask ahead, at
// the byte distance from x to next, for each call of 2-4 vectors when it
// has them and next covers x's span; otherwise axpyRowsMulti.
func axpyRowsMultiAhead[E multiElem](names *multiNames, kerns *[attnMultiMax + 1]rowsMKernel[E], ahead *[attnMultiMax + 1]rowsAheadKernel[E],
	one func(dst, alpha []float32, x []E, stride int), dst []float32, ldd, n int, alpha []float32, lda, rows, m int, x []E, stride int, next []E) {
	if m <= 0 || n <= 0 || rows <= 0 || ahead[2] == nil {
		axpyRowsMulti(names, kerns, one, dst, ldd, n, alpha, lda, rows, m, x, stride)
		return
	}
	rowsSpan(names.dst, m, n, ldd, len(dst))
	rowsSpan(names.vecs, m, rows, lda, len(alpha))
	span := rowsSpan(names.rows, rows, n, stride, len(x))
	if len(next) < span {
		axpyRowsMulti(names, kerns, one, dst, ldd, n, alpha, lda, rows, m, x, stride)
		return
	}
	// A distance between two slices' first elements, for the kernels'
	// PREFETCHT0 only: every line asked for lies within next[:span].
	d := int(uintptr(unsafe.Pointer(unsafe.SliceData(next))) - uintptr(unsafe.Pointer(unsafe.SliceData(x))))
	for i := 0; i < m; {
		c := min(m-i, attnMultiMax)
		switch {
		case ahead[c] != nil:
			ahead[c](dst[i*ldd:], ldd, alpha[i*lda:], lda, x, n, rows, stride, d)
		case kerns[c] != nil:
			kerns[c](dst[i*ldd:], ldd, alpha[i*lda:], lda, x, n, rows, stride)
		default:
			one(dst[i*ldd:i*ldd+n], alpha[i*lda:i*lda+rows], x[:span], stride)
		}
		i += c
	}
}

// dotRowsMultiAhead runs the overlay's kernels that ask ahead, at the
// byte distance from y to next, when it has them and next covers y's
// span; otherwise it asks for next (as much of y's span as it has) and
// runs dotRowsMulti.
func dotRowsMultiAhead[E multiElem](names *multiNames, kerns *[attnMultiMax + 1]rowsMKernel[E], ahead *[attnMultiMax + 1]rowsAheadKernel[E],
	one func(dst, w []float32, y []E, stride int), dst []float32, ldd, rows int, w []float32, ldw, n, m int, y []E, stride int, next []E) {
	if m <= 0 || rows <= 0 || n <= 0 {
		dotRowsMulti(names, kerns, one, dst, ldd, rows, w, ldw, n, m, y, stride)
		return
	}
	rowsSpan(names.dst, m, rows, ldd, len(dst))
	rowsSpan(names.vecs, m, n, ldw, len(w))
	span := rowsSpan(names.rows, rows, n, stride, len(y))
	if ahead[1] == nil || len(next) < span {
		PrefetchRun(next, 0, min(len(next), span))
		dotRowsMulti(names, kerns, one, dst, ldd, rows, w, ldw, n, m, y, stride)
		return
	}
	// A distance between two slices' first elements, for the kernels'
	// PREFETCHT0 only: every line asked for lies within next[:span].
	d := int(uintptr(unsafe.Pointer(unsafe.SliceData(next))) - uintptr(unsafe.Pointer(unsafe.SliceData(y))))
	for i := 0; i < m; {
		c := min(m-i, attnMultiMax)
		ahead[c](dst[i*ldd:], ldd, w[i*ldw:], ldw, y, n, rows, stride, d)
		i += c
	}
}

// multiNames are the names an out-of-range multi-vector call panics
// with (constants: building them per call would allocate).
type multiNames struct{ dst, vecs, rows string }

var (
	axpyF16Names = multiNames{"AxpyRowsF16Multi dst", "AxpyRowsF16Multi alpha", "AxpyRowsF16Multi"}
	axpyU8Names  = multiNames{"AxpyRowsU8Multi dst", "AxpyRowsU8Multi alpha", "AxpyRowsU8Multi"}
	dotF16Names  = multiNames{"DotRowsF16Multi dst", "DotRowsF16Multi w", "DotRowsF16Multi"}
	dotU8Names   = multiNames{"DotRowsU8Multi dst", "DotRowsU8Multi w", "DotRowsU8Multi"}
)

// axpyRowsMulti and dotRowsMulti check the spans of the exported
// multi-vector forms, then run m vectors in calls of the overlay's
// kernels for up to attnMultiMax, the one-vector kernel where it has
// none.
func axpyRowsMulti[E multiElem](names *multiNames, kerns *[attnMultiMax + 1]rowsMKernel[E], one func(dst, alpha []float32, x []E, stride int),
	dst []float32, ldd, n int, alpha []float32, lda, rows, m int, x []E, stride int) {
	if m <= 0 || n <= 0 || rows <= 0 {
		return
	}
	rowsSpan(names.dst, m, n, ldd, len(dst))
	rowsSpan(names.vecs, m, rows, lda, len(alpha))
	rowsSpan(names.rows, rows, n, stride, len(x))
	for i := 0; i < m; {
		c := min(m-i, attnMultiMax)
		if k := kerns[c]; k != nil {
			k(dst[i*ldd:], ldd, alpha[i*lda:], lda, x, n, rows, stride)
			i += c
			continue
		}
		one(dst[i*ldd:i*ldd+n], alpha[i*lda:i*lda+rows], x, stride)
		i++
	}
}

func dotRowsMulti[E multiElem](names *multiNames, kerns *[attnMultiMax + 1]rowsMKernel[E], one func(dst, w []float32, y []E, stride int),
	dst []float32, ldd, rows int, w []float32, ldw, n, m int, y []E, stride int) {
	if m <= 0 || rows <= 0 {
		return
	}
	rowsSpan(names.dst, m, rows, ldd, len(dst))
	if n > 0 {
		rowsSpan(names.vecs, m, n, ldw, len(w))
		rowsSpan(names.rows, rows, n, stride, len(y))
	}
	if n <= 0 {
		for i := range m {
			clear(dst[i*ldd : i*ldd+rows])
		}
		return
	}
	for i := 0; i < m; {
		c := min(m-i, attnMultiMax)
		if k := kerns[c]; k != nil {
			k(dst[i*ldd:], ldd, w[i*ldw:], ldw, y, n, rows, stride)
			i += c
			continue
		}
		one(dst[i*ldd:i*ldd+rows], w[i*ldw:i*ldw+n], y, stride)
		i++
	}
}
