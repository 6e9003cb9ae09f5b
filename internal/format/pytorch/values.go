package pytorch

// Values the pickle machine builds. Python ints are int64, floats float64,
// str is string, bool is bool, None is nil.

// tuple is a Python tuple.
type tuple []any

// list is a Python list (mutable, so held by pointer).
type list struct{ items []any }

// dict is a Python dict or OrderedDict, keeping insertion order.
type dict struct {
	keys  []any
	vals  []any
	index map[any]int // position of each hashable key
}

// set adds or replaces key. Only hashable keys (strings, numbers, bools,
// nil) are compared; others are appended.
func (d *dict) set(k, v any) {
	if comparable(k) {
		if i, ok := d.index[k]; ok {
			d.vals[i] = v
			return
		}
		if d.index == nil {
			d.index = map[any]int{}
		}
		d.index[k] = len(d.keys)
	}
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
}

func comparable(v any) bool {
	switch v.(type) {
	case nil, string, int64, float64, bool:
		return true
	}
	return false
}

// global is a reference to module.name, recorded and never resolved.
type global struct{ module, name string }

func (g global) String() string { return g.module + "." + g.name }

// storageRef is a persistent id naming a storage entry of the archive.
type storageRef struct {
	class    string // e.g. "FloatStorage"
	key      string // entry data/<key>
	location string // "cpu", "cuda:0" ...
	numel    int64
}

// tensorRef is the result of _rebuild_tensor_v2.
type tensorRef struct {
	storage *storageRef
	offset  int64   // in elements
	size    []int64 // outermost first
	stride  []int64 // in elements
}

// markObj is the MARK sentinel on the stack.
type markObj struct{}
