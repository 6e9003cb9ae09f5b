package engine

// SplitEverything makes every step that can be split across workers be
// split, however small, until the returned function restores the limits.
func SplitEverything() (restore func()) {
	cost, elems := minParallelCost, minParallelElems
	minParallelCost, minParallelElems = 1, 1
	return func() { minParallelCost, minParallelElems = cost, elems }
}

// NoFusion makes engines opened until the returned function runs dispatch
// every linear alone (fuseLinears groups none).
func NoFusion() (restore func()) {
	limit := fuseLimit
	fuseLimit = 1
	return func() { fuseLimit = limit }
}

// FusedLinears counts the linears that run inside a group with others in
// e's plans (the leaders' members).
func FusedLinears(e *Engine) int {
	n := 0
	for _, p := range e.plans {
		for _, st := range p.steps {
			n += st.fuse
		}
	}
	return n
}
