//go:build purego || !amd64

package kernel

// sumWordsImpl: the generic sum (ahead asks for nothing in this build).
func sumWordsImpl(w []uint64, _ bool) uint64 { return sumWordsGeneric(w) }
