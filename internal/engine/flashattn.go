package engine

import (
	"math"

	"github.com/aotlm/aotlm/internal/kernel"
)

// The tiled attention of a long prefill pass. The per-row path
// (attendItems) gives each (head, row) item, or a tile of four, its
// scores over every slot it sees, then one update by the value rows:
// each tile streams the whole key and value run of its key/value head,
// which at a few thousand slots (1 MiB of binary16 keys for a head of
// 128) no longer stays in the core's caches, and the scores are dot
// products reduced across a vector's lanes for every key. Here one item
// is a block of flashRows pass rows of one key/value head with every
// query head of its group; the item walks the slots in blocks of
// flashKeys, copies each block's keys transposed ([E][keys]) once and
// runs every query tile of the item over it while it is in the cache:
// the scores of four queries are then one AxpyRowsF16Multi
// (AxpyRowsU8Multi) over the E rows of transposed keys, lanes across the
// keys, and the outputs one update by the block's value rows. The
// softmax runs online: each row keeps its running maximum and sum, and
// its output is rescaled when a later block raises the maximum.
//
// Over a uint8 cache whose head size is a multiple of 4 the scores are
// 8-bit products: each query is rounded to int8 with a scale of its own
// (its largest magnitude over 127), each block's key bytes packed in key
// lanes once (kernel.PackKeysU8), and four queries' scores one
// kernel.ScoresU8 over them, 4 elements of 16 keys a VPDPBUSD where
// AVX-512 VNNI has it; the values stay as they are, summed in float32.

// flashKeys is the slots of one block of the tiled attention: 256 keys
// and values of a binary16 head of 128 are 128 KiB, the transposed
// copy 64 KiB, which a core's second-level cache holds beside the
// outputs of the item.
const flashKeys = 256

// flashRows is the pass rows of one item of the tiled attention: with
// the two query heads of a Qwen3-0.6B group, 32 tiles of four queries
// share each block's transposed keys, and a pass of 128 rows still has
// 16 items for the threads to share.
const flashRows = 64

// flashMinSlots is the fewest slots a pass's first row must see for the
// tiled attention: shorter passes attend per row, where each row's
// softmax is exact over its slots and a prefill agrees with decode bit
// for bit. Below about 1000 slots the tiles' transposing and rescaling
// cost what their cache reuse saves (one thread, binary16 Qwen3-0.6B
// shape, pass of 128 rows: 0.65-0.95x at 384 slots, 1.0-1.1x at 1,920,
// 1.15-1.4x at 3,968; AMD EPYC).
const flashMinSlots = 1024

// flashScratch is one worker's scratch of the tiled attention.
type flashScratch struct {
	kt16 []uint16   // a block's keys transposed, [E][flashKeys]
	kt8  []uint8    // the same for a uint8 cache
	s    []float32  // a tile's scores, [attnTile][flashKeys]
	mx   []float32  // each query's running maximum
	sum  []float32  // each query's running sum of exponentials
	span [][2]int32 // a tile's rows' visible slots in the block
	// The 8-bit scores of a uint8 cache: the packed keys of a block,
	// each query's bytes, correction (128 times the sum of its bytes)
	// and scale, and the keys' scales (all 1: a head has one).
	kp   []uint8
	q8   []int8
	corr []int32
	qs   []float32
	ones []float32
}

// grow makes room for head size E and nq queries.
func (f *flashScratch) grow(E, nq int, u8 bool) {
	if u8 && len(f.kt8) < E*flashKeys {
		f.kt8 = make([]uint8, E*flashKeys)
	}
	if !u8 && len(f.kt16) < E*flashKeys {
		f.kt16 = make([]uint16, E*flashKeys)
	}
	if len(f.s) < attnTile*flashKeys {
		f.s = make([]float32, attnTile*flashKeys)
		f.span = make([][2]int32, attnTile)
	}
	if len(f.mx) < nq {
		f.mx, f.sum = make([]float32, nq), make([]float32, nq)
	}
	if u8 && E%4 == 0 && (len(f.kp) < E*flashKeys || len(f.q8) < nq*E) {
		f.kp, f.q8 = make([]uint8, E*flashKeys), make([]int8, nq*E)
		f.corr, f.qs = make([]int32, nq), make([]float32, nq)
		if f.ones == nil {
			f.ones = make([]float32, flashKeys)
			for j := range f.ones {
				f.ones[j] = 1
			}
		}
	}
}

// quantizeQuery rounds x to int8 with the scale m/127, m its largest
// magnitude, into dst, and returns the scale and the sum of the bytes
// (0, 0 for a zero x).
func quantizeQuery(dst []int8, x []float32) (float32, int32) {
	var m float32
	for _, v := range x {
		m = max(m, float32(math.Abs(float64(v))))
	}
	if m == 0 || m != m || m > math.MaxFloat32 {
		clear(dst)
		return 0, 0
	}
	inv := 127 / m
	var sum int32
	for i, v := range x {
		r := int32(math.Round(float64(v * inv)))
		r = max(-127, min(127, r))
		dst[i] = int8(r)
		sum += r
	}
	return m / 127, sum
}

// useFlash reports whether a's pass attends in tiles: a pass of several
// rows over a binary16 or uint8 cache, with the multi-query row kernels,
// whose first row sees at least flashMinSlots slots.
func (a *attnArgs) useFlash() bool {
	if a.T < 2 || a.Kh == nil && a.Ku == nil || !kernel.RowsMulti() {
		return false
	}
	return a.pos+1-a.first(0) >= flashMinSlots
}

// flashItems is the number of items of a's tiled attention.
func (a *attnArgs) flashItems() int {
	return a.G * ((a.T + flashRows - 1) / flashRows)
}

// flashCost is the multiply-adds of a's tiled attention, for the pool's
// choice to split it.
func (a *attnArgs) flashCost() int {
	return a.T * a.H * (a.pos + a.T) * a.E
}

// attendFlash computes items [lo, hi) of a's tiled attention.
func attendFlash(a *attnArgs, lo, hi int, f *flashScratch) {
	grp := a.H / a.G
	f.grow(a.E, grp*flashRows, a.Ku != nil)
	for i := lo; i < hi; i++ {
		if a.Ku != nil {
			flashItem(a, i, f, a.Ku, a.Vu, f.kt8, kernel.AxpyRowsU8Multi)
		} else {
			flashItem(a, i, f, a.Kh, a.Vh, f.kt16, kernel.AxpyRowsF16Multi)
		}
	}
}

// rowsMulti is the signature of kernel.AxpyRowsF16Multi and
// kernel.AxpyRowsU8Multi.
type rowsMulti[T uint16 | uint8] func(dst []float32, ldd, n int, alpha []float32, lda, rows, m int, x []T, stride int)

// flashItem computes item i of a's tiled attention over the cache K, V
// of element type T, with kt as the transposed keys' scratch.
func flashItem[T uint16 | uint8](a *attnArgs, i int, f *flashScratch, K, V, kt []T, axpy rowsMulti[T]) {
	E, H, grp := a.E, a.H, a.H/a.G
	nb := (a.T + flashRows - 1) / flashRows
	g, b := i/nb, i%nb
	t0, t1 := b*flashRows, min((b+1)*flashRows, a.T)
	rows := t1 - t0
	lo, hi := a.first(t0), a.pos+t1 // the item's slots [lo, hi)
	for t := t0 + 1; t < t1; t++ {
		lo = min(lo, a.first(t))
	}
	scale, vscale := a.scale, float32(1)
	if a.Ku != nil {
		scale, vscale = a.scale*headScale(a.ks, g), headScale(a.vs, g)
	}
	mx, sum := f.mx[:grp*rows], f.sum[:grp*rows]
	for j := range mx {
		mx[j], sum[j] = MaskValue, 0
	}
	ld := H * E // one head's consecutive rows in q and out
	int8s := a.Ku != nil && E%4 == 0
	for hh := range grp {
		h := g*grp + hh
		for t := t0; t < t1; t++ {
			clear(a.out[t*ld+h*E : t*ld+h*E+E])
			if int8s {
				qi := hh*rows + t - t0
				sc, s := quantizeQuery(f.q8[qi*E:qi*E+E], a.q[t*ld+h*E:t*ld+h*E+E])
				f.qs[qi], f.corr[qi] = sc*scale, 128*s
			}
		}
	}
	for b0 := lo; b0 < hi; b0 += flashKeys {
		n := min(flashKeys, hi-b0)
		from := (g*a.stride + a.slotAt(b0)) * E
		if int8s {
			kernel.PackKeysU8(f.kp, 4*flashKeys, a.Ku[from:from+n*E], E, n, E)
		} else {
			transposeRows(kt, flashKeys, K[from:from+n*E], n, E)
		}
		for hh := range grp {
			h := g*grp + hh
			for ta := t0; ta < t1; ta += attnTile {
				m := min(attnTile, t1-ta)
				qi := hh*rows + ta - t0
				tl := flashTileArgs{b0: b0, n: n, ta: ta, m: m, h: h, qi: qi, scale: scale, int8s: int8s}
				flashTile(a, f, &tl, mx[qi:qi+m], sum[qi:qi+m], kt, V[from:], axpy)
			}
		}
	}
	for hh := range grp {
		h := g*grp + hh
		for t := t0; t < t1; t++ {
			qi := hh*rows + t - t0
			if sum[qi] > 0 {
				oh := a.out[t*ld+h*E : t*ld+h*E+E]
				kernel.Scale(oh, oh, vscale/sum[qi])
			}
		}
	}
}

// flashTileArgs places a tile: the block of n slots from b0, the m rows
// from ta of head h (queries qi.. of the item), the scores' scale, and
// whether they are 8-bit products.
type flashTileArgs struct {
	b0, n, ta, m, h, qi int
	scale               float32
	int8s               bool
}

// flashTile runs a tile over its block, whose transposed keys are kt (or
// f.kp packed, for 8-bit scores) and whose value rows start at V: scores,
// the online softmax's update of each row's maximum mx and sum, the
// rescaling of its output, and the output's update by the block's
// values. The columns of the block no row of the tile sees are skipped.
func flashTile[T uint16 | uint8](a *attnArgs, f *flashScratch, tl *flashTileArgs, mx, sum []float32, kt, V []T, axpy rowsMulti[T]) {
	E, ld := a.E, a.H*a.E
	b0, n, ta, m, h := tl.b0, tl.n, tl.ta, tl.m, tl.h
	jlo, jhi := n, 0
	span := f.span[:m]
	for k := range m {
		t := ta + k
		rlo := max(a.first(t)-b0, 0)
		rhi := min(a.pos+t+1-b0, n)
		span[k] = [2]int32{int32(rlo), int32(rhi)}
		if rlo < rhi {
			jlo, jhi = min(jlo, rlo), max(jhi, rhi)
		}
	}
	if jlo >= jhi {
		return // the block is past every row of the tile
	}
	w := jhi - jlo
	s := f.s[:m*flashKeys]
	if tl.int8s {
		qi := tl.qi
		kernel.ScoresU8(s, flashKeys, w, f.q8[qi*E:], E, m, f.kp[4*jlo:], 4*flashKeys, E, f.corr[qi:], f.qs[qi:], f.ones)
	} else {
		for k := range m {
			clear(s[k*flashKeys : k*flashKeys+w])
		}
		axpy(s, flashKeys, w, a.q[ta*ld+h*E:], ld, E, m, kt[jlo:], flashKeys)
	}
	for k := range m {
		t := ta + k
		row := s[k*flashKeys : k*flashKeys+w]
		rlo, rhi := max(int(span[k][0])-jlo, 0), int(span[k][1])-jlo
		if rlo >= rhi {
			clear(row)
			continue
		}
		vis := row[rlo:rhi]
		if !tl.int8s {
			kernel.Scale(vis, vis, tl.scale)
		}
		add := flashExp(a, vis, t, b0+jlo+rlo, mx[k:k+1], sum[k:k+1])
		if add != 1 {
			oh := a.out[t*ld+h*E : t*ld+h*E+E]
			kernel.Scale(oh, oh, add)
		}
		clear(row[:rlo])
		clear(row[rhi:])
	}
	axpy(a.out[ta*ld+h*E:], ld, E, s, flashKeys, w, m, V[jlo*E:], E)
}

// flashExp is the online softmax's step for row t over the scores sc of
// slots q0..: it raises the row's running maximum *mx to the largest
// score it may see, sets each score to its exponential less that
// maximum (exactly 0 where the mask hides the slot), adds them to *sum
// after rescaling it, and returns the factor the row's output must be
// rescaled by (1 when the maximum did not move).
func flashExp(a *attnArgs, sc []float32, t, q0 int, mx, sum []float32) float32 {
	if a.mask != nil {
		p := a.rowPos[t]
		for j := range sc {
			if a.hiddenSlot(t, p, q0+j) {
				sc[j] = MaskValue
			}
		}
	}
	m := max(mx[0], maxOf(sc))
	add := float32(1)
	if m > mx[0] {
		if sum[0] > 0 {
			add = expOf(mx[0] - m)
			sum[0] *= add
		}
		mx[0] = m
	}
	s := expSub(sc, m)
	if a.mask != nil {
		s = 0
		p := a.rowPos[t]
		for j := range sc {
			if a.hiddenSlot(t, p, q0+j) {
				sc[j] = 0
			}
			s += sc[j]
		}
	}
	sum[0] += s
	return add
}

// expOf is exp(x) through the same kernel as the scores' exponentials.
func expOf(x float32) float32 {
	v := [1]float32{x}
	kernel.ExpSub(v[:], 0)
	return v[0]
}

// transposeRows sets dst[c*ld+r] = src[r*cols+c] for r < rows, c < cols:
// rows rows of cols elements into cols rows of ld (>= rows) elements.
func transposeRows[T uint16 | uint8](dst []T, ld int, src []T, rows, cols int) {
	_ = dst[(cols-1)*ld+rows-1]
	r := 0
	for ; r+4 <= rows; r += 4 {
		s0, s1 := src[r*cols:(r+1)*cols], src[(r+1)*cols:(r+2)*cols]
		s2, s3 := src[(r+2)*cols:(r+3)*cols], src[(r+3)*cols:(r+4)*cols]
		for c := range cols {
			d := dst[c*ld+r : c*ld+r+4]
			d[0], d[1], d[2], d[3] = s0[c], s1[c], s2[c], s3[c]
		}
	}
	for ; r < rows; r++ {
		s0 := src[r*cols : (r+1)*cols]
		for c, v := range s0 {
			dst[c*ld+r] = v
		}
	}
}
