package bench

import "github.com/aotlm/aotlm/internal/kernel"

// Kernels names the SIMD kernels chosen for this CPU, such as
// "avx2+avx512vnni" ("generic" for the plain-Go code).
func Kernels() string { return kernel.Active() }

// Retune times each decode walk of the kernels on this CPU, keeps the
// fastest and stores it in the cache folder, where later loads read it.
func Retune() (kernel.TuneResult, error) { return kernel.Retune() }
