package artifact

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/tensor"
)

// sampleTensor is one tensor of the sample artifact with its expected bytes.
type sampleTensor struct {
	name   string
	dtype  tensor.DType
	shape  []int64
	layout string
	data   []byte
	stream bool // add through AddTensorFrom
}

// sampleManifest is the manifest written into the sample artifact.
type sampleManifest struct {
	Architecture string         `json:"architecture"`
	Hyper        map[string]int `json:"hyper"`
	ChatTemplate string         `json:"chat_template"`
	Plans        []string       `json:"plans"`
}

// sample is the content of a test artifact.
type sample struct {
	manifest sampleManifest
	tensors  []sampleTensor
	blobs    []blob
	features Features
}

// randBytes returns n pseudo-random bytes.
func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// newSample returns content covering every dtype class, sizes that are not
// multiples of 64, a zero-size tensor, a streamed tensor and a repacked
// layout.
func newSample(seed uint64) sample {
	r := rand.New(rand.NewPCG(seed, 1))
	return sample{
		manifest: sampleManifest{
			Architecture: "llama",
			Hyper:        map[string]int{"dim": 64, "n_layers": 2, "vocab": 512},
			ChatTemplate: "{% for m in messages %}{{ m.content }}{% endfor %}",
			Plans:        []string{"plan/ar32", "plan/ar1"},
		},
		tensors: []sampleTensor{
			{name: "tok_embeddings.weight", dtype: tensor.F32, shape: []int64{4, 3}, data: randBytes(r, 48)},
			{name: "norm.weight", dtype: tensor.F16, shape: []int64{5}, data: randBytes(r, 10)},
			{name: "odd.i8", dtype: tensor.I8, shape: []int64{3}, data: randBytes(r, 3)},
			{name: "empty", dtype: tensor.F32, shape: []int64{0, 4}, data: nil},
			{name: "blk.0.q4", dtype: tensor.Q4_0, shape: []int64{2, 32}, data: randBytes(r, 36), stream: true},
			{name: "blk.0.attn_q.weight", dtype: tensor.I8, shape: []int64{8, 64}, layout: "lpbq-b32-rowblock8", data: randBytes(r, 300)},
			{name: "scalar", dtype: tensor.BF16, shape: []int64{}, data: randBytes(r, 2)},
		},
		blobs: []blob{
			{KindPlan, "plan/ar32", randBytes(r, 200)},
			{KindPlan, "plan/ar1", randBytes(r, 65)},
			{KindTokenizer, "tokenizer/tokenizer.json", []byte(`{"model":{"type":"BPE"}}`)},
			{KindBlob, "empty-blob", nil},
		},
	}
}

// write stores s as an artifact at path.
func (s sample) write(t testing.TB, path string) {
	t.Helper()
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.SetRequiredFeatures(s.features); err != nil {
		t.Fatal(err)
	}
	if err := w.SetManifest(s.manifest); err != nil {
		t.Fatal(err)
	}
	for i, st := range s.tensors {
		if st.stream {
			err = w.AddTensorFrom(st.name, st.dtype, st.shape, st.layout, int64(len(st.data)), bytes.NewReader(st.data))
		} else {
			err = w.AddTensor(st.name, st.dtype, st.shape, st.layout, st.data)
		}
		if err != nil {
			t.Fatalf("tensor %d: %v", i, err)
		}
		if i == 2 { // blobs may be added between tensors
			for _, b := range s.blobs {
				if err := w.AddBlob(b.kind, b.name, b.data); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// sampleFile writes the default sample into a temporary folder and returns
// its path and bytes.
func sampleFile(t testing.TB) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.aot")
	newSample(1).write(t, path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, b
}

// openBytes opens an in-memory artifact.
func openBytes(b []byte, verify bool) (*Artifact, error) {
	return OpenReader(bytes.NewReader(b), int64(len(b)), OpenOptions{Verify: verify})
}

// rawEntry is a section table entry read from a file without validation.
type rawEntry struct {
	at     int // offset of the entry in the file
	kind   Kind
	name   string
	off    int64
	size   int64
	crcPos int // offset of its CRC field in the file
}

// rawTable lists the section table of a well-formed file b.
func rawTable(b []byte) []rawEntry {
	le := binary.LittleEndian
	toff, n := int(le.Uint64(b[24:])), int(le.Uint32(b[20:]))
	es := make([]rawEntry, n)
	for i := range es {
		e := b[toff+i*EntrySize:]
		es[i] = rawEntry{
			at:     toff + i*EntrySize,
			kind:   Kind(le.Uint32(e)),
			name:   strings.TrimRight(string(e[32:32+MaxNameLen]), "\x00"),
			off:    int64(le.Uint64(e[8:])),
			size:   int64(le.Uint64(e[16:])),
			crcPos: toff + i*EntrySize + 24,
		}
	}
	return es
}

// entry returns the raw table entry named name.
func entry(t testing.TB, b []byte, name string) rawEntry {
	t.Helper()
	for _, e := range rawTable(b) {
		if e.name == name {
			return e
		}
	}
	t.Fatalf("no section %q", name)
	return rawEntry{}
}

// reseal recomputes every section checksum, the table checksum and the
// header checksum of b in place, so that a deliberate edit reaches the
// checks behind them. Entries must stay inside the file.
func reseal(b []byte) {
	le := binary.LittleEndian
	toff, n := le.Uint64(b[24:]), uint64(le.Uint32(b[20:]))
	if toff <= uint64(len(b)) && n*EntrySize <= uint64(len(b))-toff {
		for _, e := range rawTable(b) {
			if e.off >= 0 && e.size >= 0 && e.off <= int64(len(b)) && e.size <= int64(len(b))-e.off {
				le.PutUint32(b[e.crcPos:], checksum(b[e.off:e.off+e.size]))
			}
		}
		le.PutUint32(b[48:], checksum(b[toff:toff+n*EntrySize]))
	}
	resealHeader(b)
}

// resealHeader recomputes only the header checksum.
func resealHeader(b []byte) {
	clear(b[52:56])
	binary.LittleEndian.PutUint32(b[52:], checksum(b[:HeaderSize]))
}

// wantFormatError checks that err is a *FormatError for section whose
// message contains every word in msg.
func wantFormatError(t testing.TB, err error, section string, msg ...string) {
	t.Helper()
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("got %v (%T), want a FormatError for %q", err, err, section)
	}
	if fe.Section != section {
		t.Fatalf("error names section %q, want %q: %v", fe.Section, section, err)
	}
	for _, m := range msg {
		if !strings.Contains(err.Error(), m) {
			t.Fatalf("error %q does not mention %q", err, m)
		}
	}
}
