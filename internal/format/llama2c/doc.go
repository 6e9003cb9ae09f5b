// Package llama2c reads and writes llama2.c model checkpoints (the .bin
// files of karpathy/llama2.c run.c and runq.c) and exposes their weights
// under Meta llama names as a format.Checkpoint.
//
// Byte layout. All integers are int32 and all floats float32, little-endian.
// D = dim, H = hidden_dim, L = n_layers, V = vocab_size, S = seq_len,
// hs = D / n_heads (head size), KV = n_kv_heads * hs.
//
// Version 0 (legacy, no magic):
//
//	0   dim hidden_dim n_layers n_heads n_kv_heads vocab_size seq_len   (7 x i32)
//	    vocab_size < 0 means an unshared classifier follows at the end;
//	    V is |vocab_size|
//	28  tok_embeddings    [V, D]
//	    attention_norm    [L, D]
//	    wq [L, D, D]  wk [L, KV, D]  wv [L, KV, D]  wo [L, D, D]
//	    ffn_norm          [L, D]
//	    w1 [L, H, D]  w2 [L, D, H]  w3 [L, H, D]
//	    norm              [D]
//	    freq_cis_real [S, hs/2]  freq_cis_imag [S, hs/2]   (RoPE cos / sin)
//	    output            [V, D]   only when vocab_size < 0
//
// Version 1 (float32), a 256-byte header then the weights:
//
//	0   u32 magic 0x616b3432 ("ak42" as a number; bytes 32 34 6b 61)
//	4   i32 version = 1
//	8   the 7 i32 parameters (vocab_size positive)
//	36  u8  shared_classifier (0 or 1), then zero padding to 256
//	256 attention_norm [L, D], ffn_norm [L, D], norm [D], tok_embeddings [V, D],
//	    wq, wk, wv, wo, w1, w2, w3 (each for all L layers, shapes as above),
//	    output [V, D] only when not shared
//
// Version 2 (int8 groups, as runq.c reads it), a 256-byte header:
//
//	0   magic, i32 version = 2, the 7 i32 parameters, u8 shared_classifier
//	37  i32 group_size G (unaligned), then zero padding to 256
//	256 float32: attention_norm [L, D], ffn_norm [L, D], norm [D]
//	    then each quantized tensor, in the order tok_embeddings, wq[0..L),
//	    wk[..], wv[..], wo[..], w1[..], w2[..], w3[..], output (only when
//	    not shared), stored as n int8 values q followed by n/G float32
//	    scales s; value i is q[i] * s[i/G]
//
// Every tensor of a layer is exposed separately, with the names
// "tok_embeddings.weight", "layers.{i}.attention_norm.weight",
// "layers.{i}.attention.w{q,k,v,o}.weight", "layers.{i}.ffn_norm.weight",
// "layers.{i}.feed_forward.w{1,2,3}.weight", "norm.weight", and
// "output.weight" only when the classifier is not shared (a shared one is
// tied to tok_embeddings by the model code). Version 0 files also list
// "freq_cis_real" and "freq_cis_imag". q and k rows use llama2.c's
// interleaved RoPE convention (pairs (0,1), (2,3), ... of each head).
//
// The file size must equal the size the header implies exactly; open
// refuses truncated files (naming the first tensor that does not fit),
// trailing bytes, and header values that are non-positive, absurdly large
// or inconsistent (dim % n_heads, n_heads % n_kv_heads, odd head size,
// group sizes that do not divide a tensor).
package llama2c
