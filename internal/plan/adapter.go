package plan

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
)

// AdapterRef names a low-rank adapter an artifact carries: the engine
// loads it at open under Name, and sessions choose it by that name. Its
// matrices are the blob Blob (EncodeAdapter).
type AdapterRef struct {
	Name string `json:"name"`
	Blob string `json:"blob"`
	// Source is the adapter's file or folder name, Scale the scale
	// folded into its linears (both for inspect).
	Source string  `json:"source,omitempty"`
	Scale  float64 `json:"scale"`
}

// AdapterBlobName is the blob name of the adapter named name.
func AdapterBlobName(name string) string { return "adapter/" + name }

// AdapterLinear is one linear of an adapter blob: its weight's name in
// the plans, the rank, the weight's [Out, In], the scale of its product,
// and A [Rank, In] and B [Out, Rank] row-major. A DoRA linear also has
// Magnitude [Out]: its output row o is rescaled to Magnitude[o] over the
// norm of row o of W + Scale·B·A.
type AdapterLinear struct {
	Weight        string    `json:"weight"`
	Rank, In, Out int       `json:"-"`
	Scale         float32   `json:"scale"`
	A, B          []float32 `json:"-"`
	Magnitude     []float32 `json:"-"`
}

// adapterEntry is one linear in an adapter blob's head.
type adapterEntry struct {
	Weight string  `json:"weight"`
	Rank   int     `json:"rank"`
	In     int     `json:"in"`
	Out    int     `json:"out"`
	Scale  float32 `json:"scale"`
	// DoRA tells that Out magnitudes follow B.
	DoRA bool `json:"dora,omitempty"`
}

// adapterHead is the JSON head of an adapter blob.
type adapterHead struct {
	Linears []adapterEntry `json:"linears"`
}

// EncodeAdapter lays out an adapter's linears as a blob: the length of a
// JSON head (uint32, little-endian), the head (each linear's weight,
// rank, in, out, scale and whether it is DoRA's), then each linear's A
// and B (and a DoRA linear's magnitudes) as little-endian float32
// values, in the head's order.
func EncodeAdapter(ls []AdapterLinear) ([]byte, error) {
	var h adapterHead
	n := 0
	for _, l := range ls {
		if l.Rank <= 0 || l.In <= 0 || l.Out <= 0 || len(l.A) != l.Rank*l.In || len(l.B) != l.Out*l.Rank {
			return nil, fmt.Errorf("plan: adapter linear %s: rank %d, %dx%d, with %d and %d values", l.Weight, l.Rank, l.Out, l.In, len(l.A), len(l.B))
		}
		if l.Magnitude != nil && len(l.Magnitude) != l.Out {
			return nil, fmt.Errorf("plan: adapter linear %s: %d DoRA magnitudes for %d rows", l.Weight, len(l.Magnitude), l.Out)
		}
		h.Linears = append(h.Linears, adapterEntry{l.Weight, l.Rank, l.In, l.Out, l.Scale, l.Magnitude != nil})
		n += len(l.A) + len(l.B) + len(l.Magnitude)
	}
	js, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(js)))
	b = append(b, js...)
	for _, l := range ls {
		for _, vs := range [][]float32{l.A, l.B, l.Magnitude} {
			for _, v := range vs {
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
			}
		}
	}
	return b, nil
}

// DecodeAdapter reads an adapter blob, checking every size against the
// bytes it holds.
func DecodeAdapter(b []byte) ([]AdapterLinear, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("plan: adapter blob of %d bytes", len(b))
	}
	hl := int(binary.LittleEndian.Uint32(b))
	if hl > len(b)-4 {
		return nil, fmt.Errorf("plan: adapter blob head of %d bytes in %d", hl, len(b))
	}
	var h adapterHead
	if err := json.Unmarshal(b[4:4+hl], &h); err != nil {
		return nil, fmt.Errorf("plan: adapter blob head: %w", err)
	}
	data := b[4+hl:]
	var ls []AdapterLinear
	for _, e := range h.Linears {
		if e.Rank <= 0 || e.In <= 0 || e.Out <= 0 || e.Rank > MaxCols || e.In > MaxCols || e.Out > MaxCols {
			return nil, fmt.Errorf("plan: adapter linear %s: rank %d, %dx%d", e.Weight, e.Rank, e.Out, e.In)
		}
		l := AdapterLinear{Weight: e.Weight, Rank: e.Rank, In: e.In, Out: e.Out, Scale: e.Scale}
		dsts := []*[]float32{&l.A, &l.B}
		if e.DoRA {
			dsts = append(dsts, &l.Magnitude)
		}
		for _, dst := range dsts {
			n := e.Rank * e.In
			switch dst {
			case &l.B:
				n = e.Out * e.Rank
			case &l.Magnitude:
				n = e.Out
			}
			if 4*n > len(data) {
				return nil, fmt.Errorf("plan: adapter linear %s: %d values, %d bytes left", e.Weight, n, len(data))
			}
			v := make([]float32, n)
			for i := range v {
				v[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
			}
			*dst, data = v, data[4*n:]
		}
		ls = append(ls, l)
	}
	if len(data) != 0 {
		return nil, fmt.Errorf("plan: adapter blob has %d bytes after its matrices", len(data))
	}
	return ls, nil
}
