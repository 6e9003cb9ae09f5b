//go:build !linux

package hugemem

// advisable: elsewhere there is no advice to give; Bytes is make.
const advisable = false

func advise([]byte) {}
