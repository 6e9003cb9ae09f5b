package safetensors

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/tensor"
)

func f32(name string, v ...float32) Tensor {
	return Tensor{Name: name, DType: tensor.F32, Shape: []int64{int64(len(v))}, Data: v}
}

// shardedDir writes two shards, an index with the given weight map and a
// config.json.
func shardedDir(t *testing.T, weightMap map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	s1 := "model-00001-of-00002.safetensors"
	s2 := "model-00002-of-00002.safetensors"
	if err := Write(filepath.Join(dir, s1), []Tensor{f32("a", 1, 2), f32("b", 3)}, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(dir, s2), []Tensor{f32("c", 4, 5, 6)}, nil); err != nil {
		t.Fatal(err)
	}
	if weightMap == nil {
		weightMap = map[string]string{"a": s1, "b": s1, "c": s2}
	}
	idx, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 24}, "weight_map": weightMap})
	if err := os.WriteFile(filepath.Join(dir, IndexName), idx, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ConfigName), []byte(`{"hidden_size": 64, "model_type": "llama"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestShardedOpen(t *testing.T) {
	dir := shardedDir(t, nil)
	for _, p := range []string{dir, filepath.Join(dir, IndexName), filepath.Join(dir, "model-00002-of-00002.safetensors")} {
		c, err := Open(p)
		if err != nil {
			t.Fatalf("Open(%s): %v", filepath.Base(p), err)
		}
		if n := len(c.Tensors()); n != 3 {
			t.Errorf("Open(%s): %d tensors, want 3", filepath.Base(p), n)
		}
		if h, ok := format.MetaInt(c.Metadata(), "hidden_size"); !ok || h != 64 {
			t.Errorf("config hidden_size %v", c.Metadata()["hidden_size"])
		}
		if im, _ := c.Metadata()["safetensors.index.metadata"].(map[string]any); im["total_size"] != 24.0 {
			t.Errorf("index metadata %v", im)
		}
		v, err := c.ReadFloat32("c")
		if err != nil || len(v) != 3 || v[2] != 6 {
			t.Errorf("c = %v %v", v, err)
		}
		if f, _ := c.File("c"); filepath.Base(f) != "model-00002-of-00002.safetensors" {
			t.Errorf("c in %s", f)
		}
		c.Close()
	}
}

func TestShardedHostile(t *testing.T) {
	s1 := "model-00001-of-00002.safetensors"
	s2 := "model-00002-of-00002.safetensors"
	cases := []struct {
		name, field string
		wm          map[string]string
	}{
		{"entry missing from its shard", "z", map[string]string{"a": s1, "b": s1, "c": s2, "z": s2}},
		{"entry names the wrong shard", "c", map[string]string{"a": s1, "b": s1, "c": s1, "x": s2}},
		{"path escape", "a", map[string]string{"a": "../" + s1}},
		{"absolute path", "a", map[string]string{"a": "/etc/passwd"}},
		{"empty map", "weight_map", map[string]string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := shardedDir(t, tc.wm)
			c, err := OpenDir(dir)
			if err == nil {
				c.Close()
				t.Fatal("opened")
			}
			var fe *format.Error
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("error %v, want *format.Error naming %q", err, tc.field)
			}
		})
	}
	t.Run("tensor in two shards", func(t *testing.T) {
		dir := shardedDir(t, nil)
		if err := Write(filepath.Join(dir, s2), []Tensor{f32("c", 4, 5, 6), f32("a", 7, 8)}, nil); err != nil {
			t.Fatal(err)
		}
		_, err := OpenDir(dir)
		var fe *format.Error
		if !errors.As(err, &fe) || fe.Field != "a" {
			t.Errorf("error %v, want *format.Error naming a", err)
		}
	})
	t.Run("bad config", func(t *testing.T) {
		dir := shardedDir(t, nil)
		os.WriteFile(filepath.Join(dir, ConfigName), []byte(`{"a":`), 0o644)
		_, err := OpenDir(dir)
		var fe *format.Error
		if !errors.As(err, &fe) || fe.Field != ConfigName {
			t.Errorf("error %v, want *format.Error naming config.json", err)
		}
	})
	t.Run("several files, no index", func(t *testing.T) {
		dir := shardedDir(t, nil)
		os.Remove(filepath.Join(dir, IndexName))
		if _, err := OpenDir(dir); err == nil {
			t.Error("opened an ambiguous folder")
		}
	})
	t.Run("empty folder", func(t *testing.T) {
		if _, err := OpenDir(t.TempDir()); err == nil {
			t.Error("opened an empty folder")
		}
	})
}
