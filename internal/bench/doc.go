// Package bench measures what a compiled artifact costs to run: its bytes
// (Describe: file, sections, tensor classes, KV cache, the arena of every
// plan) and its speed (Run: llama-bench style tests over a Session).
//
// Tests, named as llama-bench names them:
//
//	pp<P>     prefill of P random valid token ids from an empty sequence;
//	          tok/s = P / prefill time
//	tg<N>     N one-token decode steps after an untimed 1-token prompt;
//	          tok/s = N / decode time
//	pg<P>,<N> a P-token prefill then N decode steps, timed together;
//	          tok/s = (P + N) / total time, and DecodeTokS = N / decode time
//
// Every test runs Repetitions times from an empty sequence (Session.Reset);
// TokS is the mean of the per-repetition rates and Stddev their sample
// standard deviation, as llama-bench reports them. Decode steps feed the
// argmax of the previous logits, as greedy generation does, so a step costs
// what it costs in use. The package knows no engine: it drives the small
// Session interface, which the engine's session implements and tests fake.
package bench
