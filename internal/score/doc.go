// Package score scores models: the perplexity of a model over a text,
// its results on benchmark tasks (LAMBADA, HellaSwag, llama.cpp's
// multiple-choice files), and the phases of one quantized model — its
// float checkpoint, its dequantized weights under simulated activation
// and cache quantization, and its compiled artifact — so that the error
// each step adds is measured against the first phase (perplexity, KL
// divergence, top-1 agreement). The arithmetic is the eval package's;
// this package opens the models and feeds it.
package score
