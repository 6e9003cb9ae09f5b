package tokenizer

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// TestBPECacheEviction fills one set with three words: the cache keeps at
// most two, never returns ids for the wrong word, and skips long words.
func TestBPECacheEviction(t *testing.T) {
	c := newBPECache()
	var words []string
	want := c.set("w0")
	for i := 0; len(words) < 3; i++ {
		if w := fmt.Sprintf("w%d", i); c.set(w) == want {
			words = append(words, w)
		}
	}
	for i, w := range words {
		c.put(w, []int32{int32(i), int32(i)})
	}
	found := 0
	for i, w := range words {
		if ids, ok := c.get(w); ok {
			found++
			if !slices.Equal(ids, []int32{int32(i), int32(i)}) {
				t.Errorf("%q: ids %v", w, ids)
			}
		}
	}
	if found != 2 {
		t.Errorf("%d of 3 words of one set cached, want 2", found)
	}
	if _, ok := c.get(words[2]); !ok {
		t.Errorf("the newest word was evicted")
	}
	long := string(make([]byte, bpeCacheWordMax+1))
	c.put(long, []int32{1})
	if _, ok := c.get(long); ok {
		t.Errorf("a word over %d bytes was cached", bpeCacheWordMax)
	}
	var zero bpeCache // no table: never hits, never panics
	zero.put("a", []int32{1})
	if _, ok := zero.get("a"); ok {
		t.Errorf("zero cache hit")
	}
}

// TestEncodeConcurrent encodes parts of War and Peace from several
// goroutines sharing the cache and compares with encoding them one by one
// on a fresh tokenizer (run with -race to check the lock-free cache).
func TestEncodeConcurrent(t *testing.T) {
	text := string(testutil.ReadFile(t, "text/war-and-peace.txt")[:400000])
	b := bpeLoad(t, "tokenizers/qwen2.5")
	const parts = 8
	chunk := func(i int) string { return text[i*len(text)/parts : (i+1)*len(text)/parts] }
	want := make([][]int, parts)
	for i := range want {
		want[i] = b.Encode(chunk(i), EncodeOptions{})
	}
	b.cache = newBPECache()
	got := make([][]int, parts)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2 {
				got[i] = b.Encode(chunk(i), EncodeOptions{})
			}
		}()
	}
	wg.Wait()
	for i := range got {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("part %d: concurrent encoding differs", i)
		}
	}
}
