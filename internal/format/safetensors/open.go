package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/aotlm/aotlm/internal/userfile"
)

// IndexName is the file naming the shards of a sharded model.
const IndexName = "model.safetensors.index.json"

// SingleName is the weights file of an unsharded model folder.
const SingleName = "model.safetensors"

// ConfigName is the model configuration read into Metadata.
const ConfigName = "config.json"

// Open opens path, which may be a model folder (see OpenDir), a
// *.index.json file (all shards it names), a shard listed by the
// model.safetensors.index.json of its folder (all shards), or a single
// .safetensors file. config.json in the folder, when present, becomes the
// metadata.
func Open(path string) (*Checkpoint, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	if st.IsDir() {
		return OpenDir(path)
	}
	dir, base := filepath.Dir(path), filepath.Base(path)
	if strings.HasSuffix(base, ".index.json") {
		return openIndex(path)
	}
	idx := filepath.Join(dir, IndexName)
	if exists(idx) {
		wm, _, err := readIndex(idx)
		if err != nil {
			return nil, err
		}
		for _, f := range wm {
			if f == base {
				return openIndex(idx)
			}
		}
	}
	return openFiles([]string{path}, dir)
}

// OpenDir opens the model in dir: the shards of model.safetensors.index.json
// if present, else model.safetensors, else the folder's only .safetensors
// file. config.json, when present, becomes the metadata.
func OpenDir(dir string) (*Checkpoint, error) {
	if idx := filepath.Join(dir, IndexName); exists(idx) {
		return openIndex(idx)
	}
	if single := filepath.Join(dir, SingleName); exists(single) {
		return openFiles([]string{single}, dir)
	}
	matches, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", dir, err)
	}
	switch len(matches) {
	case 0:
		return nil, fmt.Errorf("safetensors: %s: no .safetensors file: %w", dir, fs.ErrNotExist)
	case 1:
		return openFiles(matches, dir)
	}
	return nil, errorf(dir, IndexName, "%d .safetensors files and no index naming them", len(matches))
}

func exists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// readIndex parses an index file, checking that every shard name is a plain
// file name in the index's folder.
func readIndex(path string) (weightMap map[string]string, meta map[string]any, err error) {
	b, err := userfile.ReadFile(path, userfile.Config.Named("index"))
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: %w", err)
	}
	var idx struct {
		Metadata  map[string]any    `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, nil, errorf(path, "weight_map", "invalid index JSON: %v", err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, nil, errorf(path, "weight_map", "missing or empty")
	}
	for name, f := range idx.WeightMap {
		if f == "" || f == "." || f == ".." || strings.ContainsAny(f, `/\`) || filepath.Base(f) != f {
			return nil, nil, errorf(path, name, "shard %q is not a plain file name", f)
		}
	}
	return idx.WeightMap, idx.Metadata, nil
}

// openIndex opens every shard named by the index at path and checks each
// weight_map entry against the shard headers.
func openIndex(path string) (*Checkpoint, error) {
	wm, meta, err := readIndex(path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	var files []string
	seen := map[string]bool{}
	for _, f := range wm {
		if !seen[f] {
			seen[f] = true
			files = append(files, filepath.Join(dir, f))
		}
	}
	sort.Strings(files)
	c, err := openFiles(files, dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(wm))
	for name := range wm {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		got, ok := c.File(name)
		if !ok {
			c.Close()
			return nil, errorf(path, name, "weight_map names shard %s, which does not hold it", wm[name])
		}
		if filepath.Base(got) != wm[name] {
			c.Close()
			return nil, errorf(path, name, "weight_map names shard %s, but it is stored in %s", wm[name], filepath.Base(got))
		}
	}
	if meta != nil {
		c.meta["safetensors.index.metadata"] = meta
	}
	return c, nil
}

// openFiles opens and validates files (in the given order) and reads the
// config.json of dir.
func openFiles(files []string, dir string) (*Checkpoint, error) {
	config, err := readConfig(dir)
	if err != nil {
		return nil, err
	}
	if config == nil {
		config = map[string]any{}
	}
	modules, err := sentenceModules(dir, config)
	if err != nil {
		return nil, err
	}
	var shards []*shard
	closeAll := func() {
		for _, s := range shards {
			s.reg.close()
		}
	}
	for _, f := range files {
		reg, err := openRegion(f)
		if err != nil {
			closeAll()
			return nil, err
		}
		s, err := newShard(reg, f)
		if err != nil {
			reg.close()
			closeAll()
			return nil, err
		}
		shards = append(shards, s)
	}
	for _, m := range modules {
		reg, err := openRegion(m.path)
		if err != nil {
			closeAll()
			return nil, err
		}
		s, err := newShard(reg, m.path)
		if err != nil {
			reg.close()
			closeAll()
			return nil, err
		}
		s.hdr.index = map[string]int{}
		for i := range s.hdr.tensors {
			s.hdr.tensors[i].info.Name = m.prefix + s.hdr.tensors[i].info.Name
			s.hdr.index[s.hdr.tensors[i].info.Name] = i
		}
		shards = append(shards, s)
	}
	c, err := assemble(shards, config)
	if err != nil {
		closeAll()
		return nil, err
	}
	return c, nil
}

// readConfig parses dir/config.json; it returns nil when there is none.
func readConfig(dir string) (map[string]any, error) {
	path := filepath.Join(dir, ConfigName)
	b, err := userfile.ReadFile(path, userfile.Config.Named("config"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, errorf(path, ConfigName, "invalid JSON: %v", err)
	}
	if m == nil {
		return nil, errorf(path, ConfigName, "not a JSON object")
	}
	return m, nil
}
