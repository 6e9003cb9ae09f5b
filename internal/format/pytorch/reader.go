package pytorch

import (
	"archive/zip"
	"errors"
	"fmt"
	"github.com/aotlm/aotlm/internal/mmapfile"
	"io"
	"strings"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/tensor"
)

const formatName = "pytorch"

// maxPickle caps the uncompressed size of data.pkl; a compressed data.pkl is
// further capped at pickleRatio times the file size (a zip bomb guard).
const (
	maxPickle   = 1 << 30
	pickleRatio = 64
	maxNesting  = 16 // nested dicts flattened into dotted names
)

// Checkpoint is an opened PyTorch zip checkpoint. It implements
// format.Checkpoint.
type Checkpoint struct {
	r       io.ReaderAt
	closer  io.Closer
	file    string
	meta    map[string]any
	infos   []format.TensorInfo
	entries map[string]*entry
}

// entry is one listed tensor.
type entry struct {
	info       format.TensorInfo
	contiguous bool
	stride     []int64
}

var _ format.Checkpoint = (*Checkpoint)(nil)

// Open opens a torch.save zip checkpoint (.pth, .pt, .bin) at path.
func Open(path string) (*Checkpoint, error) {
	reg, err := mmapfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pytorch: %w", err)
	}
	c, err := OpenReader(reg, reg.Size, path)
	if err != nil {
		reg.Close()
		return nil, err
	}
	c.closer = reg
	return c, nil
}

// OpenReader reads a checkpoint of size bytes from r; name is used in
// errors. The whole pickle and every tensor's placement are validated here.
func OpenReader(r io.ReaderAt, size int64, name string) (*Checkpoint, error) {
	bad := func(field, msg string, args ...any) error {
		return &format.Error{Format: formatName, File: name, Field: field, Msg: fmt.Sprintf(msg, args...)}
	}
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, bad("zip", "not a readable zip archive: %v", err)
	}
	files := map[string]*zip.File{}
	var pkl *zip.File
	for _, f := range zr.File {
		files[f.Name] = f
		dir, base, ok := strings.Cut(f.Name, "/")
		if ok && base == "data.pkl" && dir != "" {
			if pkl != nil {
				return nil, bad("data.pkl", "two pickles: %q and %q", pkl.Name, f.Name)
			}
			pkl = f
		}
	}
	if pkl == nil {
		return nil, bad("data.pkl", "no <name>/data.pkl entry: not a torch.save zip checkpoint")
	}
	prefix := strings.TrimSuffix(pkl.Name, "data.pkl")
	if bo, ok := files[prefix+"byteorder"]; ok {
		b, err := readSmall(bo, 16, size)
		if err != nil {
			return nil, bad("byteorder", "%v", err)
		}
		if s := strings.TrimSpace(string(b)); s != "little" {
			return nil, &format.UnsupportedError{Format: formatName, File: name, What: fmt.Sprintf("byte order %q", s)}
		}
	}
	limit := int64(maxPickle)
	if pkl.Method != zip.Store && size < limit/pickleRatio {
		limit = size*pickleRatio + 1<<20
	}
	data, err := readSmall(pkl, limit, size)
	if err != nil {
		return nil, bad("data.pkl", "%v", err)
	}
	root, err := unpickle(data)
	if err != nil {
		return nil, bad("data.pkl", "%v", err)
	}
	c := &Checkpoint{r: r, file: name, meta: map[string]any{}, entries: map[string]*entry{}}
	top, ok := root.(*dict)
	if !ok {
		if t, isT := root.(*tensorRef); isT { // torch.save of a single tensor
			top = &dict{keys: []any{""}, vals: []any{t}}
		} else {
			return nil, bad("data.pkl", "top-level object is %T, not a dict of tensors", root)
		}
	}
	var tensors []namedTensor
	if err := flatten(top, "", 0, c.meta, &tensors); err != nil {
		return nil, bad("data.pkl", "%v", err)
	}
	p := placer{files: files, prefix: prefix, size: size, offsets: map[string]int64{}, name: name, r: r}
	for _, nt := range tensors {
		if _, dup := c.entries[nt.name]; dup {
			return nil, bad(nt.name, "tensor name appears twice")
		}
		e, err := p.place(nt.name, nt.t)
		if err != nil {
			return nil, err
		}
		c.entries[nt.name] = e
		c.infos = append(c.infos, e.info)
	}
	return c, nil
}

// readSmall reads a whole zip entry of at most limit bytes.
func readSmall(f *zip.File, limit, fileSize int64) ([]byte, error) {
	if f.UncompressedSize64 > uint64(limit) {
		return nil, fmt.Errorf("entry %q declares %d bytes, more than the %d allowed", f.Name, f.UncompressedSize64, limit)
	}
	if f.Method == zip.Store && f.UncompressedSize64 > uint64(fileSize) {
		return nil, fmt.Errorf("entry %q is larger than the file", f.Name)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("entry %q: %w", f.Name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("entry %q: %w", f.Name, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("entry %q inflates past %d bytes", f.Name, limit)
	}
	return b, nil
}

type namedTensor struct {
	name string
	t    *tensorRef
}

// flatten walks nested dicts, collecting tensors under dotted names and
// scalar values as metadata. Lists, None and other values are skipped.
func flatten(d *dict, prefix string, depth int, meta map[string]any, out *[]namedTensor) error {
	if depth > maxNesting {
		return fmt.Errorf("dicts nested deeper than %d at %q", maxNesting, prefix)
	}
	for i, k := range d.keys {
		var key string
		switch k := k.(type) {
		case string:
			key = k
		case int64:
			key = fmt.Sprint(k)
		default:
			continue
		}
		name := key
		if prefix != "" {
			name = prefix + "." + key
		}
		switch v := d.vals[i].(type) {
		case *tensorRef:
			*out = append(*out, namedTensor{name, v})
		case *dict:
			if err := flatten(v, name, depth+1, meta, out); err != nil {
				return err
			}
		case string, int64, float64, bool:
			meta[name] = v
		}
	}
	return nil
}

// storageDType maps a storage class to its element type.
func storageDType(class string) (tensor.DType, bool) {
	switch class {
	case "FloatStorage":
		return tensor.F32, true
	case "HalfStorage":
		return tensor.F16, true
	case "BFloat16Storage":
		return tensor.BF16, true
	case "DoubleStorage":
		return tensor.F64, true
	case "LongStorage":
		return tensor.I64, true
	case "IntStorage":
		return tensor.I32, true
	case "ShortStorage":
		return tensor.I16, true
	case "CharStorage":
		return tensor.I8, true
	case "ByteStorage", "BoolStorage":
		return tensor.U8, true
	}
	return tensor.Invalid, false
}

// errNotContiguous is wrapped by ReadFloat32 for strided views.
var errNotContiguous = errors.New("non-contiguous strides")
