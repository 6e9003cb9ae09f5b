package kernel

// The implementations in use, generic until an overlay's init replaces
// them. Each has the signature and meaning of its generic version.
var (
	quantizeQ8Impl = quantizeQ8Generic
	q4MatMulImpl   = q4MatMulGeneric
	q4ZerosImpl    func(dst []float32, ldd int, sym *Q4, zs []float32, x *Q8, n0, n1 int) // nil: sym, then addZeroTerms
	w8MatMulImpl   = w8MatMulGeneric
	q6MatMulImpl   = q6MatMulGeneric
	dotImpl        = dotGeneric
	axpyImpl       = axpyGeneric
	dotF16Impl     = dotF16Generic
	axpyF16Impl    = axpyF16Generic
	dotKVQ4Impl    = dotKVQ4Generic
	axpyKVQ4Impl   = axpyKVQ4Generic
	siluImpl       = siluGeneric
	siluMulImpl    = siluMulGeneric
	expSubImpl     = expSubGeneric
	geluTanhImpl   = geluTanhGeneric
	scaleImpl      = scaleGeneric
	maxImpl        = maxGeneric
	mulImpl        = mulGeneric
	addImpl        = addGeneric
	butterflyImpl  = butterflyGeneric
	rotateImpl     = rotateGeneric
	decayRowsImpl  = decayRowsGeneric

	axpyRowsImpl    = axpyRowsGeneric
	dotRowsImpl     = dotRowsGeneric
	axpyRowsF16Impl = axpyRowsF16Generic
	dotRowsF16Impl  = dotRowsF16Generic
	dotRowsF16WImpl = dotRowsF16WGeneric
	axpyRowsU8Impl  = axpyRowsU8Generic
	dotRowsU8Impl   = dotRowsU8Generic
	columnsF16Impl  = columnsF16Generic

	// The multi-vector row kernels of the selected overlay by vector
	// count, nil without.
	axpyRowsMF16Impl, dotRowsMF16Impl [attnMultiMax + 1]rowsMKernel[uint16]
	axpyRowsMU8Impl, dotRowsMU8Impl   [attnMultiMax + 1]rowsMKernel[uint8]
	// The selected overlay's dot kernels that ask ahead as they read
	// (DotRowsF16MultiAhead), by vector count 1..4, nil without.
	dotRowsAF16Impl [attnMultiMax + 1]rowsAheadKernel[uint16]
	dotRowsAU8Impl  [attnMultiMax + 1]rowsAheadKernel[uint8]
	// The selected overlay's axpy kernels that ask ahead
	// (AxpyRowsF16MultiAhead), by vector count 2..4, nil without.
	axpyRowsAF16Impl [attnMultiMax + 1]rowsAheadKernel[uint16]
	axpyRowsAU8Impl  [attnMultiMax + 1]rowsAheadKernel[uint8]
)

// attnMultiMax is the most vectors of a multi-vector row kernel.
const attnMultiMax = 4

// rowsMKernel is a multi-vector form of a binary16 row kernel (see
// AxpyRowsF16Multi): ld and lv are the strides of dst and of the vectors
// v, n the elements of a row and rows the rows at stride.
type rowsMKernel[E multiElem] func(dst []float32, ld int, v []float32, lv int, m []E, n, rows, stride int)

// rowsAheadKernel is a multi-vector dot kernel (rowsMKernel) that, for
// each line of m's rows it loads, asks for the line ahead bytes away.
type rowsAheadKernel[E multiElem] func(dst []float32, ld int, v []float32, lv int, m []E, n, rows, stride, ahead int)

// Overlay is one ISA's set of implementations; a nil field leaves the
// previous choice in place.
type Overlay struct {
	Name      string
	Supported bool // the running CPU has the features
	// BatchExact: Q4MatMul and W8MatMul give a token's outputs the same
	// bits whether it is multiplied alone or among other tokens (a
	// batched decode then gives each session the logits it gets alone).
	BatchExact bool
	QuantizeQ8 func(q []int8, d []float32, sum []int32, x []float32)
	Q4MatMul   func(dst []float32, ldd int, w *Q4, x *Q8, n0, n1 int)
	W8MatMul   func(dst []float32, ldd int, w *W8, x *Q8, n0, n1 int)
	Q6MatMul   func(dst []float32, ldd int, w *Q6, x *Q8, n0, n1 int)
	Dot        func(a, b []float32) float32
	Axpy       func(y []float32, alpha float32, x []float32)
	DotF16     func(a []float32, b []uint16) float32
	// DotKVQ4 and AxpyKVQ4 are kernel.DotKVQ4 and kernel.AxpyKVQ4 (on a
	// row of the length their callers checked).
	DotKVQ4   func(q []float32, src []uint8) float32
	AxpyKVQ4  func(y []float32, alpha float32, src []uint8)
	AxpyF16   func(y []float32, alpha float32, x []uint16)
	SiLU      func(dst, x []float32)
	SiLUMul   func(dst, gate, up []float32)
	ExpSub    func(x []float32, m float32) float32
	GELUTanh  func(dst, x []float32)
	Scale     func(dst, x []float32, s float32)
	Max       func(x []float32) float32
	Mul       func(dst, a, b []float32)
	Add       func(dst, a, b []float32)
	Butterfly func(a, b []float32)
	Rotate    func(a, b, cos, sin []float32)
	DecayRows func(dst, x, o, m, k, q []float32, decay float32, next []float32)

	AxpyRows    func(dst, alpha, x []float32, stride int)
	DotRows     func(dst, w, y []float32, stride int)
	AxpyRowsF16 func(dst, alpha []float32, x []uint16, stride int)
	DotRowsF16  func(dst, w []float32, y []uint16, stride int)
	DotRowsF16W func(dst []float32, w []uint16, y []float32, stride int)
	AxpyRowsU8  func(dst, alpha []float32, x []uint8, stride int)
	DotRowsU8   func(dst, w []float32, y []uint8, stride int)
	ColumnsF16  func(dst []uint16, stride int, src []float32, ld, T, n int)

	// axpyRowsMF16[m] and dotRowsMF16[m], when set, are the m-vector
	// forms of AxpyRowsF16Multi and DotRowsF16Multi (m = 2..4), each
	// vector's result exactly that of AxpyRowsF16 and DotRowsF16 of this
	// overlay; the U8 ones likewise. The caller has checked the spans.
	axpyRowsMF16 [attnMultiMax + 1]rowsMKernel[uint16]
	dotRowsMF16  [attnMultiMax + 1]rowsMKernel[uint16]
	axpyRowsMU8  [attnMultiMax + 1]rowsMKernel[uint8]
	dotRowsMU8   [attnMultiMax + 1]rowsMKernel[uint8]
	// dotRowsAF16[m] and dotRowsAU8[m] (m = 1..4), when set, are
	// dotRowsMF16[m] and dotRowsMU8[m] (DotRowsF16 and DotRowsU8 for m =
	// 1), bit for bit, asking ahead as they read (DotRowsF16MultiAhead).
	dotRowsAF16 [attnMultiMax + 1]rowsAheadKernel[uint16]
	dotRowsAU8  [attnMultiMax + 1]rowsAheadKernel[uint8]
	// axpyRowsAF16[m] and axpyRowsAU8[m] (m = 2..4), when set, are
	// axpyRowsMF16[m] and axpyRowsMU8[m], bit for bit, asking ahead as
	// they read (AxpyRowsF16MultiAhead).
	axpyRowsAF16 [attnMultiMax + 1]rowsAheadKernel[uint16]
	axpyRowsAU8  [attnMultiMax + 1]rowsAheadKernel[uint8]
	// scoresU8, when set, is the overlay's ScoresU8 over checked spans.
	scoresU8 func(dst []float32, ldd, n int, q []int8, ldq, m int, k []uint8, ld, E int, corr []int32, qs, ks []float32)

	// The activation record layouts the overlay's Q4MatMul and W8MatMul
	// read (Q8.Begin), nil when they read Q8 directly.
	q4Records, w8Records *actLayout

	// q4Zeros, when set, is Q4MatMul of a weight with zero points from
	// its parts (PrepareZeros): the symmetric codes and the block terms
	// zs, added block by block in the product (q4ZerosImpl).
	q4Zeros func(dst []float32, ldd int, sym *Q4, zs []float32, x *Q8, n0, n1 int)
}

// overlays lists this build's overlays from least to most capable (the
// per-ISA file's archOverlays).
var overlays = archOverlays()

// Overlays returns the overlays compiled into this build, with whether
// the CPU supports each (tests and `aotlm inspect` report them).
func Overlays() []Overlay { return overlays }

// Active returns the names of the overlays in use, "generic" when none.
func Active() string {
	s := ""
	for _, o := range overlays {
		if o.Supported {
			if s != "" {
				s += "+"
			}
			s += o.Name
		}
	}
	if s == "" {
		return "generic"
	}
	return s
}

// install applies the supported overlays in order.
func install() {
	for _, o := range overlays {
		if !o.Supported {
			continue
		}
		if o.QuantizeQ8 != nil {
			quantizeQ8Impl = o.QuantizeQ8
		}
		if o.Q4MatMul != nil {
			q4MatMulImpl, q4Layout, q4ZerosImpl = o.Q4MatMul, o.q4Records, o.q4Zeros
		}
		if o.W8MatMul != nil {
			w8MatMulImpl, w8Layout = o.W8MatMul, o.w8Records
		}
		if o.Q6MatMul != nil {
			q6MatMulImpl = o.Q6MatMul
		}
		if o.Dot != nil {
			dotImpl = o.Dot
		}
		if o.Axpy != nil {
			axpyImpl = o.Axpy
		}
		if o.DotF16 != nil {
			dotF16Impl = o.DotF16
		}
		if o.AxpyF16 != nil {
			axpyF16Impl = o.AxpyF16
		}
		if o.DotKVQ4 != nil {
			dotKVQ4Impl = o.DotKVQ4
		}
		if o.AxpyKVQ4 != nil {
			axpyKVQ4Impl = o.AxpyKVQ4
		}
		if o.SiLU != nil {
			siluImpl = o.SiLU
		}
		if o.SiLUMul != nil {
			siluMulImpl = o.SiLUMul
		}
		if o.ExpSub != nil {
			expSubImpl = o.ExpSub
		}
		if o.GELUTanh != nil {
			geluTanhImpl = o.GELUTanh
		}
		if o.Scale != nil {
			scaleImpl = o.Scale
		}
		if o.Max != nil {
			maxImpl = o.Max
		}
		if o.Mul != nil {
			mulImpl = o.Mul
		}
		if o.Add != nil {
			addImpl = o.Add
		}
		if o.Butterfly != nil {
			butterflyImpl = o.Butterfly
		}
		if o.Rotate != nil {
			rotateImpl = o.Rotate
		}
		if o.DecayRows != nil {
			decayRowsImpl = o.DecayRows
		}
		if o.AxpyRows != nil {
			axpyRowsImpl = o.AxpyRows
		}
		if o.DotRows != nil {
			dotRowsImpl = o.DotRows
		}
		if o.AxpyRowsF16 != nil {
			axpyRowsF16Impl, axpyRowsMF16Impl, axpyRowsAF16Impl = o.AxpyRowsF16, o.axpyRowsMF16, o.axpyRowsAF16
		}
		if o.DotRowsF16 != nil {
			dotRowsF16Impl, dotRowsMF16Impl, dotRowsAF16Impl = o.DotRowsF16, o.dotRowsMF16, o.dotRowsAF16
		}
		if o.DotRowsF16W != nil {
			dotRowsF16WImpl = o.DotRowsF16W
		}
		if o.AxpyRowsU8 != nil {
			axpyRowsU8Impl, axpyRowsMU8Impl, axpyRowsAU8Impl = o.AxpyRowsU8, o.axpyRowsMU8, o.axpyRowsAU8
		}
		if o.DotRowsU8 != nil {
			dotRowsU8Impl, dotRowsMU8Impl, dotRowsAU8Impl = o.DotRowsU8, o.dotRowsMU8, o.dotRowsAU8
		}
		if o.ColumnsF16 != nil {
			columnsF16Impl = o.ColumnsF16
		}
		if o.scoresU8 != nil {
			scoresU8Impl = o.scoresU8
		}
	}
}

func init() { install() }
