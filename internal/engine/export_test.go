package engine

// SplitEverything makes every step that can be split across workers be
// split, however small, until the returned function restores the limits.
func SplitEverything() (restore func()) {
	cost, elems := minParallelCost, minParallelElems
	minParallelCost, minParallelElems = 1, 1
	return func() { minParallelCost, minParallelElems = cost, elems }
}
