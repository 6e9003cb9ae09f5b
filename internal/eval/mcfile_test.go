package eval

import (
	"encoding/binary"
	"strings"
	"testing"
)

// mcFile writes tasks in llama.cpp's multiple-choice format (the layout
// on ReadMultipleChoice), each with an empty mc2.
func mcFile(tasks []MCTask) []byte {
	str := func(b []byte, s string) []byte {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
		return append(b, s...)
	}
	var blobs [][]byte
	for _, t := range tasks {
		b := str(nil, t.Context)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(t.Endings)))
		for _, e := range t.Endings {
			b = str(b, e)
		}
		for i := range t.Endings {
			l := uint32(0)
			if i == t.Gold {
				l = 1
			}
			b = binary.LittleEndian.AppendUint32(b, l)
		}
		blobs = append(blobs, binary.LittleEndian.AppendUint32(b, 0))
	}
	out := binary.LittleEndian.AppendUint32(nil, uint32(len(tasks)))
	off := 4 + 4*len(tasks)
	for _, b := range blobs {
		out = binary.LittleEndian.AppendUint32(out, uint32(off))
		off += len(b)
	}
	for _, b := range blobs {
		out = append(out, b...)
	}
	return out
}

func TestReadMultipleChoice(t *testing.T) {
	want := []MCTask{
		{Context: "The cat", Endings: []string{"sat.", "flew away.", "sang."}, Gold: 0},
		{Context: "Tom had a", Endings: []string{"dog.", "red ball.", "car.", "hat.", "cake."}, Gold: 1},
	}
	got, err := ReadMultipleChoice(mcFile(want))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d tasks, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Context != want[i].Context || got[i].Gold != want[i].Gold || strings.Join(got[i].Endings, "|") != strings.Join(want[i].Endings, "|") {
			t.Errorf("task %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestReadMultipleChoiceRefuses: every damaged file is an error that names
// what is wrong, never a panic or a partial list.
func TestReadMultipleChoiceRefuses(t *testing.T) {
	good := mcFile([]MCTask{{Context: "a", Endings: []string{"b", "c"}, Gold: 1}})
	noGold := mcFile([]MCTask{{Context: "a", Endings: []string{"b", "c"}, Gold: 5}})
	badOffset := append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(badOffset[4:], 9)
	hugeString := append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(hugeString[8:], 1<<30)
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"empty":        {nil, "task count"},
		"zero tasks":   {make([]byte, 4), "0 tasks"},
		"truncated":    {good[:len(good)-3], "truncated"},
		"trailing":     {append(append([]byte(nil), good...), 0), "after the last task"},
		"no gold":      {noGold, "labelled 1"},
		"bad offset":   {badOffset, "offset 9"},
		"huge string":  {hugeString, "past the end"},
		"many answers": {mcFile([]MCTask{{Context: "a", Endings: make([]string, 101), Gold: 0}}), "more than 100"},
		"empty answer": {mcFile([]MCTask{{Context: "a", Endings: []string{"b", ""}, Gold: 0}}), "answer 2 is empty"},
	} {
		_, err := ReadMultipleChoice(tc.data)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
}

// FuzzReadMultipleChoice: any bytes give tasks or an error, never a panic,
// and every task read has a context, answers and a gold index among them.
func FuzzReadMultipleChoice(f *testing.F) {
	f.Add(mcFile([]MCTask{{Context: "The cat", Endings: []string{"sat.", "flew."}, Gold: 0}}))
	f.Add(mcFile([]MCTask{{Context: "x", Endings: []string{"a", "b", "c"}, Gold: 2}, {Context: "y", Endings: []string{"d"}, Gold: 0}}))
	f.Add([]byte{1, 0, 0, 0, 8, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		tasks, err := ReadMultipleChoice(data)
		if err != nil {
			return
		}
		for i, tk := range tasks {
			if tk.Context == "" || len(tk.Endings) == 0 || tk.Gold < 0 || tk.Gold >= len(tk.Endings) {
				t.Fatalf("task %d read as %+v", i, tk)
			}
		}
	})
}
