package decoding

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/sample"
)

// Lookahead is lookahead decoding (Fu et al., "Break the Sequential
// Dependency of LLM Inference Using Lookahead Decoding"), laid out as
// ExecuTorch's Qualcomm runner does. Each pass holds, after the newest
// token, a lookahead branch of W columns over N-1 levels (Jacobi
// iterations whose trajectories fill an n-gram pool keyed by their first
// token) and up to G verification branches: the pool's n-grams that start
// with the newest token. The target's own choices are walked along the
// branch that matches them, longest first, and only those rows are
// committed. One pass has (W+G)(N-1) rows.
type Lookahead struct {
	N, W, G  int // n-gram size (>= 2), window (>= 1), verification branches (>= 1)
	Adaptive Adaptive
}

// Name returns "lookahead".
func (l *Lookahead) Name() string { return "lookahead" }

// Rows is the number of rows of one lookahead pass, (W+G)(N-1).
func (l *Lookahead) Rows() int { return (l.W + l.G) * (l.N - 1) }

// Check refuses sizes out of range.
func (l *Lookahead) Check() error {
	if l.N < 2 || l.W < 1 || l.G < 1 {
		return fmt.Errorf("lookahead: n-gram %d, window %d, branches %d: want n-gram >= 2, window >= 1, branches >= 1", l.N, l.W, l.G)
	}
	return nil
}

// Start makes a lookahead decoder over t.
func (l *Lookahead) Start(t Target, history []int, smp *sample.Sampler) (Decoder, error) {
	if err := l.Check(); err != nil {
		return nil, err
	}
	if t.Recurrent() {
		return Plain(t, smp, l.Name(), "a recurrent model takes no tree passes: plain decoding"), nil
	}
	if r := l.Rows(); r > t.MaxRows() {
		return Plain(t, smp, l.Name(), fmt.Sprintf("a pass of %d rows does not fit the model's largest plan of %d rows (compile with a lookahead plan): plain decoding", r, t.MaxRows())), nil
	}
	n := l.N - 1
	d := &lookaheadDecoder{t: t, smp: smp, n: l.N, w: l.W, g: l.G, pool: map[int]*ring{},
		levels: make([][]int, n), prev: make([]int, l.W), next: make([]int, l.W),
		ctl: newControl(l.Adaptive, memoryKey([3]int{l.N, l.W, l.G}, t)), st: Stats{Strategy: l.Name()}}
	// the window starts with tokens of the prompt (a fixed seed keeps runs
	// reproducible)
	rng := rand.New(rand.NewPCG(uint64(len(history)), 0x6c61))
	for i := range d.levels {
		d.levels[i] = make([]int, l.W)
		for j := range d.levels[i] {
			if len(history) > 1 {
				d.levels[i][j] = history[1+rng.IntN(len(history)-1)]
			} else if len(history) == 1 {
				d.levels[i][j] = history[0]
			}
		}
	}
	d.st.Note = d.ctl.resumeNote()
	return d, nil
}

// ring holds up to G n-grams (their tokens after the key), the oldest
// replaced first.
type ring struct {
	grams [][]int
	head  int
}

type lookaheadDecoder struct {
	t       Target
	smp     *sample.Sampler
	n, w, g int
	levels  [][]int // [N-1][W] lookahead branch
	prev    []int   // level 0 before the last update
	next    []int
	pool    map[int]*ring
	ctl     control
	st      Stats
}

func (d *lookaheadDecoder) Stats() Stats { return d.st }
func (d *lookaheadDecoder) Close()       { d.ctl.close() }

func (d *lookaheadDecoder) Next(id int, generated []int) ([]int, error) {
	start := time.Now()
	L := d.n - 1
	rows := (d.w + d.g) * L
	if d.ctl.plainNext() || d.t.Pos()+rows > d.t.Context() {
		out, err := plainStep(d.t, d.smp, id, generated, &d.st)
		d.ctl.plainDone(time.Since(start), &d.st)
		return out, err
	}
	var branches [][]int
	if r := d.pool[id]; r != nil {
		branches = slices.Clone(r.grams) // update below changes the ring
	}
	ids := make([]int, 0, rows)
	parents := make([]int, 0, rows)
	for i := range L {
		for j := range d.w {
			tok := d.levels[i][j]
			switch {
			case i == 0 && j == 0:
				tok = id
				parents = append(parents, -1)
			case i == 0:
				parents = append(parents, j-1)
			default:
				parents = append(parents, (i-1)*d.w+j)
			}
			ids = append(ids, tok)
		}
	}
	base := d.w * L // first row of the verification branches
	for _, gram := range branches {
		for k, tok := range gram {
			ids = append(ids, tok)
			if k == 0 {
				parents = append(parents, 0)
			} else {
				parents = append(parents, len(ids)-2)
			}
		}
	}
	mask, err := engine.TreeMask(parents)
	if err != nil {
		return nil, err
	}
	// the rows whose logits are read: the newest token's, the last
	// level's and the branches'
	var sel []int
	for r := range ids {
		if r == 0 || (r >= (L-1)*d.w && r < base) || r >= base {
			sel = append(sel, r)
		}
	}
	logits, err := d.t.Run(&engine.Pass{IDs: ids, Mask: mask, Logits: sel})
	if err != nil {
		return nil, err
	}
	row := func(r int) []float32 {
		i, _ := slices.BinarySearch(sel, r)
		return logits.Row(i)
	}

	// walk the target's choices along the branches that match them
	hist := append(generated[:len(generated):len(generated)], make([]int, 0, L+1)...)
	tok := d.smp.Sample(row(0), hist)
	out := []int{tok}
	hist = append(hist, tok)
	d.update(id, row)
	best, n := -1, 0
	active := make([]bool, len(branches))
	for g, gram := range branches {
		active[g] = gram[0] == tok
	}
	for v := 1; v <= L; v++ {
		found := -1
		for g := range branches {
			if active[g] {
				found = g
				break
			}
		}
		if found < 0 {
			break
		}
		best, n = found, v
		tok = d.smp.Sample(row(base+best*L+v-1), hist)
		out = append(out, tok)
		hist = append(hist, tok)
		for g, gram := range branches {
			active[g] = active[g] && v < L && gram[v] == tok
		}
	}
	commit := []int{0}
	if n > 0 {
		g := best
		for v := 1; v <= n; v++ {
			commit = append(commit, base+g*L+v-1)
		}
	}
	if err := d.t.Commit(commit); err != nil {
		return nil, err
	}
	d.st.Passes++
	d.st.Verify++
	d.st.Rows += len(ids)
	if len(branches) > 0 {
		d.st.Drafted += L
	}
	d.st.Accepted += n
	d.st.Tokens += len(out)
	d.ctl.guessDone(time.Since(start), len(out), d.n, &d.st)
	return out, nil
}

// update moves the lookahead branch one Jacobi step on (each level takes
// the next one's tokens, the last level the target's greedy choices of
// its rows) and adds each column's trajectory to the pool, keyed by the
// token the column started with.
func (d *lookaheadDecoder) update(id int, row func(int) []float32) {
	L := d.n - 1
	copy(d.prev, d.levels[0])
	d.prev[0] = id // row 0 held the newest token
	for j := range d.w {
		d.next[j] = sample.Argmax(row((L-1)*d.w + j))
	}
	first := d.levels[0]
	copy(d.levels, d.levels[1:])
	d.levels[L-1] = first
	copy(d.levels[L-1], d.next)
	for f := range d.w {
		gram := make([]int, L)
		for j := range L {
			gram[j] = d.levels[j][f]
		}
		d.add(d.prev[f], gram)
	}
}

// add puts gram in key's ring unless it is there already.
func (d *lookaheadDecoder) add(key int, gram []int) {
	r := d.pool[key]
	if r == nil {
		r = &ring{}
		d.pool[key] = r
	}
	for _, g := range r.grams {
		if slices.Equal(g, gram) {
			return
		}
	}
	if len(r.grams) < d.g {
		r.grams = append(r.grams, gram)
		return
	}
	r.grams[r.head] = gram
	r.head = (r.head + 1) % d.g
}
