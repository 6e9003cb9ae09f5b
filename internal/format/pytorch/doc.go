// Package pytorch reads PyTorch checkpoints written by torch.save in the zip
// format (torch 1.6 and later) without running any pickle code.
//
// Byte layout. The file is a ZIP archive whose entries all sit in one folder
// <name>/ (the file's stem when saved, often "archive"):
//
//	<name>/data.pkl            a pickle (protocol 2 as torch writes it; 3-5 read too)
//	<name>/data/<key>          raw storage bytes, little-endian, one entry per storage,
//	                           stored uncompressed (often 64-byte aligned in the file)
//	<name>/byteorder           "little" or "big" (absent in old files: little)
//	<name>/version, .format_version, .storage_alignment   small text files, ignored
//
// data.pkl usually describes a (Ordered)dict of name -> tensor. A tensor is the
// call torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride,
// requires_grad, backward_hooks[, metadata]); nn.Parameter wraps it in
// torch._utils._rebuild_parameter(tensor, requires_grad, backward_hooks).
// storage is a persistent id (BINPERSID) holding the tuple
//
//	('storage', torch.<Type>Storage, key, location, numel)
//
// where key names the entry data/<key> and numel counts its elements. Sizes
// and strides are in elements, outermost dimension first; storage_offset is
// in elements from the start of the storage. Several tensors may view one
// storage at different offsets.
//
// The pickle machine here only builds plain values: numbers, strings, tuples,
// lists, dicts, references to globals (never resolved to code) and the few
// allowed reconstructions above. Anything else is refused with a
// *format.Error naming the callable or opcode. Nested dicts are flattened to
// dotted tensor names; scalar values (an epoch number, a string) become
// metadata.
//
// Only tensors whose strides are row-major contiguous (ignoring dimensions of
// size 1) can be read; others are listed but ReadFloat32 refuses them with a
// *format.UnsupportedError naming the tensor.
package pytorch
