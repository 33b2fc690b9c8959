package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/glint-llm/glint/internal/pages"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/glint-llm/glint/model"
)

// Open memory-maps and parses a safetensors file.
func Open(path string) (*File, error) {
	b, unmap, err := mapFile(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	f, err := Parse(b)
	if err != nil {
		unmap()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.Path, f.unmap, f.mapping = path, unmap, b
	return f, nil
}

// Set is the tensors of one checkpoint, from one file or from the shards
// an index names.
type Set struct {
	Files []*File
	where map[string]*File
	names []string
}

// IndexName and SingleName are the file names Hugging Face uses.
const (
	IndexName  = "model.safetensors.index.json"
	SingleName = "model.safetensors"
)

// OpenDir opens the checkpoint in a Hugging Face model folder: the shards
// named by model.safetensors.index.json when it exists, else
// model.safetensors.
func OpenDir(dir string) (*Set, error) {
	idx := filepath.Join(dir, IndexName)
	if _, err := os.Stat(idx); err == nil {
		return OpenIndex(idx)
	}
	f, err := Open(filepath.Join(dir, SingleName))
	if err != nil {
		return nil, err
	}
	s := &Set{Files: []*File{f}, where: map[string]*File{}}
	for _, t := range f.Tensors {
		s.where[t.Name] = f
		s.names = append(s.names, t.Name)
	}
	return s, nil
}

// OpenIndex opens a sharded checkpoint from its index file, whose
// weight_map names, for every tensor, the shard (a file in the index's
// folder) that holds it.
func OpenIndex(path string) (*Set, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("safetensors: %s: empty or missing weight_map", path)
	}
	dir := filepath.Dir(path)
	s := &Set{where: map[string]*File{}}
	shards := map[string]*File{}
	for _, name := range slices.Sorted(maps.Keys(idx.WeightMap)) {
		shard := idx.WeightMap[name]
		if !validName(shard) {
			s.Close()
			return nil, fmt.Errorf("safetensors: %s: tensor %q: shard name %q is not a file in the index's folder", path, name, shard)
		}
		f, ok := shards[shard]
		if !ok {
			f, err = Open(filepath.Join(dir, shard))
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("safetensors: %s: %w", path, err)
			}
			shards[shard] = f
			s.Files = append(s.Files, f)
		}
		if !f.Has(name) {
			s.Close()
			return nil, fmt.Errorf("safetensors: %s: tensor %q is not in its shard %s", path, name, shard)
		}
		s.where[name] = f
		s.names = append(s.names, name)
	}
	return s, nil
}

// Has reports whether the checkpoint holds the named tensor.
func (s *Set) Has(name string) bool { _, ok := s.where[name]; return ok }

// Info describes the named tensor.
func (s *Set) Info(name string) (TensorInfo, bool) {
	f, ok := s.where[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Info(name)
}

// Tensor returns the named tensor; its Data aliases a mapped shard.
func (s *Set) Tensor(name string) (model.TensorData, error) {
	f, ok := s.where[name]
	if !ok {
		return model.TensorData{}, fmt.Errorf("safetensors: no tensor %q in the checkpoint", name)
	}
	return f.Tensor(name)
}

// Names lists the tensors (file order for one file, sorted for an index).
func (s *Set) Names() []string { return slices.Clone(s.names) }

// Close unmaps every shard.
func (s *Set) Close() error {
	var errs []error
	for _, f := range s.Files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

// ReleasePages drops a tensor's pages of the file mapping from resident
// memory once a backend has its own copy (model.PageReleaser); the data
// stays valid and is read back from the file if touched.
func (f *File) ReleasePages(name string) {
	if t, ok := f.Info(name); ok && f.mapping != nil {
		pages.Release(f.mapping, f.data[t.Begin:t.End])
	}
}

// ReleasePages releases a tensor's pages in the shard that holds it.
func (s *Set) ReleasePages(name string) {
	if f, ok := s.where[name]; ok {
		f.ReleasePages(name)
	}
}
