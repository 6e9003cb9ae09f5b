package pytorch

// reduce handles REDUCE: callable(*args). Only an allow-list of callables is
// evaluated, each by building a plain value; anything else is refused with
// an error naming the callable.
func (m *machine) reduce() error {
	argsV, err := m.pop()
	if err != nil {
		return err
	}
	fnV, err := m.pop()
	if err != nil {
		return err
	}
	args, ok := argsV.(tuple)
	if !ok {
		return m.fail("REDUCE arguments are %T, not a tuple", argsV)
	}
	fn, ok := fnV.(global)
	if !ok {
		return m.fail("REDUCE callable is %T, not a global", fnV)
	}
	switch fn.String() {
	case "collections.OrderedDict", "builtins.dict", "__builtin__.dict":
		if len(args) != 0 {
			return m.fail("%s called with %d arguments", fn, len(args))
		}
		return m.push(&dict{})
	case "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_tensor":
		t, err := m.rebuildTensor(args)
		if err != nil {
			return err
		}
		return m.push(t)
	case "torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state":
		if len(args) < 1 {
			return m.fail("%s without arguments", fn)
		}
		t, ok := args[0].(*tensorRef)
		if !ok {
			return m.fail("%s of %T, not a tensor", fn, args[0])
		}
		return m.push(t)
	}
	return m.fail("refusing to call %s", fn)
}

// rebuildTensor checks the arguments of _rebuild_tensor_v2:
// (storage, storage_offset, size, stride, ...).
func (m *machine) rebuildTensor(args tuple) (*tensorRef, error) {
	if len(args) < 4 {
		return nil, m.fail("_rebuild_tensor_v2 with %d arguments, want at least 4", len(args))
	}
	st, ok := args[0].(*storageRef)
	if !ok {
		return nil, m.fail("tensor storage is %T, not a persistent storage id", args[0])
	}
	off, ok := args[1].(int64)
	if !ok || off < 0 {
		return nil, m.fail("tensor storage_offset %v is not a non-negative int", args[1])
	}
	size, err := m.ints(args[2], "size")
	if err != nil {
		return nil, err
	}
	stride, err := m.ints(args[3], "stride")
	if err != nil {
		return nil, err
	}
	if len(size) != len(stride) {
		return nil, m.fail("tensor size has %d dims, stride %d", len(size), len(stride))
	}
	return &tensorRef{storage: st, offset: off, size: size, stride: stride}, nil
}

// ints converts a tuple of non-negative ints.
func (m *machine) ints(v any, what string) ([]int64, error) {
	t, ok := v.(tuple)
	if !ok {
		return nil, m.fail("tensor %s is %T, not a tuple", what, v)
	}
	if len(t) > maxDims {
		return nil, m.fail("tensor %s has %d dims, more than %d", what, len(t), maxDims)
	}
	out := make([]int64, len(t))
	for i, x := range t {
		n, ok := x.(int64)
		if !ok || n < 0 {
			return nil, m.fail("tensor %s[%d] = %v is not a non-negative int", what, i, x)
		}
		out[i] = n
	}
	return out, nil
}
