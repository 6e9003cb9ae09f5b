package eval

import (
	"encoding/binary"
	"fmt"
)

// maxAnswers bounds the answers of one task, as llama.cpp's reader does.
const maxAnswers = 100

// ReadMultipleChoice reads tasks in llama.cpp's binary multiple-choice
// format (llama-perplexity --multiple-choice; the ARC, MMLU, HellaSwag and
// TruthfulQA files it is used with), all little-endian:
//
//	u32 n; u32 offset[n]            task count, byte offset of each task
//	task: string question; answers mc1; answers mc2
//	answers: u32 k (<= 100); string answer[k]; i32 label[k]
//	string: u32 length; bytes
//
// Each task's context is its question and its endings the mc1 answers; the
// gold ending is the first mc1 answer labelled 1 (mc2, the answers with
// several right ones, is read and not scored, as llama.cpp does). Tasks are
// read in order from the first offset; an offset that does not point at
// its task, a length past the end, a task with no answers, an empty
// question or answer, or no answer labelled 1 is an error naming the task.
func ReadMultipleChoice(data []byte) ([]MCTask, error) {
	r := mcReader{b: data}
	n, err := r.u32("task count")
	if err != nil {
		return nil, err
	}
	if n == 0 || int64(n)*4 > int64(len(data)) {
		return nil, fmt.Errorf("eval: multiple-choice file: %d tasks in %d bytes", n, len(data))
	}
	offsets := make([]uint32, n)
	for i := range offsets {
		if offsets[i], err = r.u32("task offsets"); err != nil {
			return nil, err
		}
	}
	tasks := make([]MCTask, 0, n)
	for i := range int(n) {
		if int64(offsets[i]) != int64(r.off) {
			return nil, fmt.Errorf("eval: multiple-choice task %d: offset %d, but the task starts at byte %d", i+1, offsets[i], r.off)
		}
		t, err := r.task()
		if err != nil {
			return nil, fmt.Errorf("eval: multiple-choice task %d: %w", i+1, err)
		}
		tasks = append(tasks, t)
	}
	if r.off != len(data) {
		return nil, fmt.Errorf("eval: multiple-choice file: %d bytes after the last task", len(data)-r.off)
	}
	return tasks, nil
}

type mcReader struct {
	b   []byte
	off int
}

func (r *mcReader) u32(what string) (uint32, error) {
	if len(r.b)-r.off < 4 {
		return 0, fmt.Errorf("eval: multiple-choice file: %s: truncated at byte %d", what, r.off)
	}
	v := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v, nil
}

func (r *mcReader) str(what string) (string, error) {
	n, err := r.u32(what)
	if err != nil {
		return "", err
	}
	if int64(n) > int64(len(r.b)-r.off) {
		return "", fmt.Errorf("%s: length %d past the end of the file", what, n)
	}
	s := string(r.b[r.off : r.off+int(n)])
	r.off += int(n)
	return s, nil
}

func (r *mcReader) answers(what string) ([]string, []int32, error) {
	k, err := r.u32(what + " count")
	if err != nil {
		return nil, nil, err
	}
	if k > maxAnswers {
		return nil, nil, fmt.Errorf("%s: %d answers, more than %d", what, k, maxAnswers)
	}
	ans := make([]string, k)
	for i := range ans {
		if ans[i], err = r.str(fmt.Sprintf("%s %d", what, i+1)); err != nil {
			return nil, nil, err
		}
	}
	labels := make([]int32, k)
	for i := range labels {
		v, err := r.u32(fmt.Sprintf("%s label %d", what, i+1))
		if err != nil {
			return nil, nil, err
		}
		labels[i] = int32(v)
	}
	return ans, labels, nil
}

func (r *mcReader) task() (MCTask, error) {
	q, err := r.str("question")
	if err != nil {
		return MCTask{}, err
	}
	ans, labels, err := r.answers("mc1 answer")
	if err != nil {
		return MCTask{}, err
	}
	if _, _, err := r.answers("mc2 answer"); err != nil {
		return MCTask{}, err
	}
	if q == "" || len(ans) == 0 {
		return MCTask{}, fmt.Errorf("an empty question or no answers")
	}
	t := MCTask{Context: q, Endings: ans, Gold: -1}
	for i, a := range ans {
		if a == "" {
			return MCTask{}, fmt.Errorf("answer %d is empty", i+1)
		}
		if labels[i] == 1 && t.Gold < 0 {
			t.Gold = i
		}
	}
	if t.Gold < 0 {
		return MCTask{}, fmt.Errorf("no answer is labelled 1")
	}
	return t, nil
}
