// Package graph is aotlm's model IR: a small set of ops over row-major
// activations, a builder that architectures use to describe a forward pass,
// and Interpreter, a plain-Go evaluator that is the definition of every op.
//
// Dimension letters used in comments throughout:
//
//	T  rows of the pass (tokens processed at once; 1 when decoding)
//	D  model width (hidden size)
//	F  feed-forward width
//	V  vocabulary size
//	H  query heads, G key/value heads, E head size (head_dim)
//	R  rotary width (E, or less for partial rotary)
//	K  input width of a linear, N its output width
//
// Every activation is a [T, C] matrix of float32 stored row-major, where the
// column count C is fixed when the graph is built and T is given when it runs,
// so one graph serves prefill and decode. Weights are named tensors with
// fixed shapes, looked up in a weight table at run time. Attention keeps its
// keys and values in a State: a static per-layer cache sized to the context
// at creation; a pass at position p writes rows p..p+T-1 and each query row
// attends to the cache causally (optionally within a sliding window).
//
// Nodes are appended in topological order, so evaluating them in slice order
// is always valid. The compiler (a later stage) reads the same graph.
package graph
