// Package artifact owns the compiled model file (.aot): its byte layout, a
// Writer that builds one atomically, and Open, which maps one read-only and
// validates it. It knows nothing about architectures, graphs or kernels: the
// compiler decides what the manifest, plans and weight layouts mean, and the
// engine interprets them.
//
// Byte layout (all integers little-endian, all offsets from the file start):
//
//	header, 128 bytes at offset 0
//	  0   [8]u8  magic "AOTLM\x00\r\n"
//	  8   u32    format version (currently 1; a newer one is refused)
//	  12  u32    header size (128)
//	  16  u32    flags (none defined; any set bit is refused)
//	  20  u32    section count C
//	  24  u64    section table offset T (a multiple of 64)
//	  32  u64    required CPU features (bit set, see Features)
//	  40  u64    file size in bytes
//	  48  u32    CRC-32C of the C*96 bytes of the section table
//	  52  u32    CRC-32C of these 128 bytes with bytes 52..55 zeroed
//	  56  [72]u8 reserved, zero
//
//	sections, each starting at a multiple of its alignment (64..65536),
//	never overlapping the header, the section table or each other; every
//	byte of the file belongs to the header, a section, the table, or zero
//	padding shorter than the alignment of what follows it
//
//	section table, C entries of 96 bytes at offset T
//	  0   u32    kind (1 manifest, 2 tensor-index, 3 weights, 4 plan,
//	             5 tokenizer, 6 blob; larger values are opaque blobs)
//	  4   u32    alignment, a power of two in 64..65536; offset is a multiple of it
//	  8   u64    offset
//	  16  u64    size in bytes
//	  24  u32    CRC-32C of the section's bytes
//	  28  u32    reserved, zero
//	  32  [64]u8 name, UTF-8, NUL-padded; unique in the file
//
// A file has exactly one manifest section (named "manifest"), one
// tensor-index section ("tensor-index") and one weights section ("weights").
// The Writer emits, in order: header, weights, blobs in the order added,
// manifest, tensor index, section table.
//
// The manifest is one JSON object chosen by the compiler (architecture,
// hyper-parameters, quantization recipe, provenance, tokenizer, chat
// template, generation defaults, plans); this package only checks that it
// is a JSON object.
//
// The tensor index is JSON:
//
//	{"tensors": [{"name": "blk.0.attn_q.weight", "dtype": "i8",
//	              "shape": [2048, 1024], "layout": "lpbq-b32-rowblock8",
//	              "offset": 0, "size": 1179648}, ...]}
//
// dtype is a tensor.DType name ("f32", "f16", "bf16", "i8", "u8", "q4_0",
// ...); shape is outermost dimension first; offset is relative to the start
// of the weights section and a multiple of 64; size is the byte count. An
// empty layout means plain row-major storage, and then size must equal the
// element count times the dtype size; any other layout tag is the
// compiler's name for a repacked form, its size is the compiler's business
// and dtype is the element type the kernel computes in. Tensors do not
// overlap and lie inside the weights section; names are unique.
//
// Validation on every Open (cost: header plus the small sections): magic,
// version, header checksum, flags, file size, required CPU features against
// this machine, section table bounds and checksum, every section in bounds,
// aligned, not overlapping, uniquely named, padding zero, and the checksum
// of every section except weights (so a changed byte anywhere outside the
// weights is refused at open); the manifest is a JSON object; every tensor index
// entry is well formed and inside the weights section. The weights checksum
// costs a read of every weight byte, so it is checked only by
// OpenOptions.Verify or Artifact.Verify.
//
// Files are memory-mapped on unix, so tensor data is returned without
// copying; elsewhere, and through OpenReader, data is read with ReadAt.
package artifact
