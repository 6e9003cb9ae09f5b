// Package safetensors reads and writes Hugging Face safetensors files and
// opens sharded safetensors models (a folder with an index) as one
// format.Checkpoint.
//
// Byte layout of one file (all integers little-endian):
//
//	offset 0      u64   N, the byte length of the JSON header
//	offset 8      N     JSON object, UTF-8, optionally padded with spaces:
//	                    {"<tensor name>": {"dtype": "F32",
//	                                       "shape": [d0, d1, ...],
//	                                       "data_offsets": [begin, end]},
//	                     ...,
//	                     "__metadata__": {"<key>": "<string value>", ...}}
//	offset 8+N    ...   data buffer; a tensor occupies bytes [begin, end) of
//	                    it, row-major, outermost dimension first
//
// Rules enforced on open: the header fits in the file and is one JSON object
// with no duplicate names; every dtype is known; shapes are non-negative
// and their element count does not overflow; end >= begin, end lies inside
// the data buffer, and end-begin equals the element count times the dtype
// size; no two non-empty tensors overlap. Gaps between tensors are allowed.
//
// dtypes: F32, F16, BF16 and F64 read as float32; BOOL, U8, I8, I16, U16,
// I32, U32, I64, U64, C64 and the 8-bit floats (F8_E4M3, F8_E5M2, F8_E8M0)
// are listed but reading them as float32 returns *format.UnsupportedError.
// Sub-byte types (F4, F6_*) and unknown names are refused at open.
//
// A sharded model is a folder holding model.safetensors.index.json:
//
//	{"metadata": {"total_size": ...},
//	 "weight_map": {"<tensor name>": "model-00001-of-00002.safetensors", ...}}
//
// Every weight_map entry must name a tensor present in its shard, and no
// tensor may appear in two shards. config.json next to the weights, when
// present, becomes the checkpoint's metadata.
//
// Files are memory-mapped where the platform supports it (unix), and read
// with ReadAt elsewhere; OpenReader reads from any io.ReaderAt.
package safetensors
