// Package rotate folds orthogonal rotations into a model's float weights,
// as QuaRot and SpinQuant do before quantization: the rotated model
// computes the same function, but its weights and activations have fewer
// outliers, so they quantize with less error.
//
//   - R1 rotates the residual stream by an orthogonal Q [D, D]: the
//     embedding rows become e Q, every linear reading the stream (through
//     an RMSNorm, whose gain is first folded into those linears) becomes
//     W Q, and every linear writing to it becomes Q^T W (bias b Q). RMSNorm
//     commutes with Q once its gain is 1, since |x Q| = |x|. A tied
//     classifier is untied (its folded gain differs from the embedding).
//   - R2 rotates each attention head's values by an orthogonal H [E, E]:
//     v_proj's rows of each key/value head become H^T W (bias b H), and
//     o_proj's columns of each head W H; attention mixes values linearly
//     per head, so its output is rotated the same way.
//
// The rotations are normalized Walsh-Hadamard matrices (kernel.FWHT),
// optionally times a seeded random +-1 diagonal; for a size that is not a
// power of two, the block-diagonal matrix of Hadamard blocks of the
// largest power of two dividing it (at least 8). Families whose structure a rotation does not commute with are
// refused with the reason: a norm between a linear and the residual add
// (Gemma 3's sandwich norms), LayerNorm (RWKV-7), values that are not a
// plain projection.
//
// Apply's Report records what a low-rank adapter for the unrotated model
// needs to follow the rotations (the norm gains R1 folded, the linears
// each rotation changed); AdapterMap maps an adapter's pairs with it.
package rotate
