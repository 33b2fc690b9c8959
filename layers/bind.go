package layers

import (
	"fmt"
	"reflect"
	"sync"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/model"
)

// tagFields maps the gguf tags of struct type t's backend.Tensor fields to
// their indices.
func tagFields(t reflect.Type) map[string]int {
	tensor := reflect.TypeFor[backend.Tensor]()
	fields := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		if tag, ok := f.Tag.Lookup("gguf"); ok && f.Type == tensor {
			fields[tag] = i
		}
	}
	return fields
}

var (
	modelFields = sync.OnceValue(func() map[string]int { return tagFields(reflect.TypeFor[Model]()) })
	layerFields = sync.OnceValue(func() map[string]int { return tagFields(reflect.TypeFor[Layer]()) })
)

// field is the field of m (or of its layer w.Layer) tagged with w.Key:
// the table in package model names the weights, the tags place them.
func (m *Model) field(w model.Weight) (*backend.Tensor, error) {
	v, fields := reflect.ValueOf(m).Elem(), modelFields()
	if w.Layer >= 0 {
		if w.Layer >= len(m.Layers) {
			return nil, fmt.Errorf("layers: tensor %q: layer %d of %d", w.Name, w.Layer, len(m.Layers))
		}
		v, fields = reflect.ValueOf(&m.Layers[w.Layer]).Elem(), layerFields()
	}
	i, ok := fields[w.Key]
	if !ok {
		return nil, fmt.Errorf("layers: tensor %q: no field tagged gguf:%q", w.Name, w.Key)
	}
	return v.Field(i).Addr().Interface().(*backend.Tensor), nil
}
