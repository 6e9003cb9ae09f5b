package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/userfile"
)

// ModulesName lists the modules of a sentence-transformers folder.
const ModulesName = "modules.json"

// moduleFile is the weights file of a sentence-transformers module, its
// tensors named with prefix in front.
type moduleFile struct {
	path, prefix string
}

// sentenceModules reads dir/modules.json, when present: the pooling of
// its Pooling module and its Dense modules, whose weights file each is
// returned with the module's path as a name prefix ("2_Dense." in front
// of "linear.weight"). meta gets format.MetaSentencePooling and
// format.MetaSentenceDense (each Dense module's config with its "path",
// and "weights_missing" when it has no model.safetensors).
func sentenceModules(dir string, meta map[string]any) ([]moduleFile, error) {
	path := filepath.Join(dir, ModulesName)
	b, err := userfile.ReadFile(path, userfile.Config.Named("modules"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	var mods []struct {
		Path string `json:"path"`
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &mods); err != nil {
		return nil, errorf(path, ModulesName, "invalid JSON: %v", err)
	}
	var files []moduleFile
	var dense []any
	for i, m := range mods {
		kind := m.Type[strings.LastIndex(m.Type, ".")+1:]
		if kind != "Pooling" && kind != "Dense" {
			continue
		}
		if m.Path == "" || !filepath.IsLocal(m.Path) || strings.ContainsAny(m.Path, `/\`) {
			return nil, errorf(path, ModulesName, "module %d (%s): path %q is not a folder name", i, kind, m.Path)
		}
		cfgPath := filepath.Join(dir, m.Path, ConfigName)
		cb, err := userfile.ReadFile(cfgPath, userfile.Config.Named("module config"))
		if err != nil {
			return nil, fmt.Errorf("safetensors: module %s: %w", m.Path, err)
		}
		var cfg map[string]any
		if err := json.Unmarshal(cb, &cfg); err != nil {
			return nil, errorf(cfgPath, ConfigName, "invalid JSON: %v", err)
		}
		if kind == "Pooling" {
			meta[format.MetaSentencePooling] = poolingMode(cfg)
			continue
		}
		cfg["path"] = m.Path
		w := filepath.Join(dir, m.Path, SingleName)
		if exists(w) {
			files = append(files, moduleFile{path: w, prefix: m.Path + "."})
		} else {
			cfg["weights_missing"] = true // the family refuses it if it needs it
		}
		dense = append(dense, cfg)
	}
	if dense != nil {
		meta[format.MetaSentenceDense] = dense
	}
	return files, nil
}

// poolingMode names the pooling a Pooling module's config chooses: mean,
// cls or last, else the mode's own name (which no model accepts).
func poolingMode(cfg map[string]any) string {
	for _, m := range []struct{ key, name string }{
		{"pooling_mode_mean_tokens", "mean"}, {"pooling_mode_cls_token", "cls"}, {"pooling_mode_lasttoken", "last"},
		{"pooling_mode_max_tokens", "max"}, {"pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len"},
		{"pooling_mode_weightedmean_tokens", "weightedmean"},
	} {
		if b, _ := cfg[m.key].(bool); b {
			return m.name
		}
	}
	return "none"
}
