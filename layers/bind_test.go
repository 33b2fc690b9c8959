package layers

import (
	"reflect"
	"testing"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/model"
)

// TestWeightFields: the table in package model and the gguf tags here
// agree. Every weight of every architecture lands in its own field, every
// tagged field is some architecture's weight (a misspelt tag would leave
// its field nil), and a field left nil is one the forward pass may skip.
func TestWeightFields(t *testing.T) {
	named := map[string]bool{}
	for _, arch := range model.Archs {
		c, err := model.Config{Arch: arch, NLayer: 2, NEmbd: 8, NHead: 2, NHeadKV: 1, HeadDim: 4, NFF: 8,
			Vocab: 4, Context: 4, RopeDims: 4, HasRopeFreqs: true}.WithArch()
		if err != nil {
			t.Fatal(err)
		}
		m := &Model{Layers: make([]Layer, c.NLayer)}
		seen := map[*backend.Tensor]string{}
		for _, w := range c.Weights(c.Context) {
			dst, err := m.field(w)
			if err != nil {
				t.Errorf("%s: %v", arch, err)
				continue
			}
			if prev, ok := seen[dst]; ok {
				t.Errorf("%s: %q and %q fill one field", arch, prev, w.Name)
			}
			seen[dst] = w.Name
			scope := "model"
			if w.Layer >= 0 {
				scope = "layer"
			}
			named[scope+" "+w.Key] = true
		}
	}
	for scope, typ := range map[string]reflect.Type{"model": reflect.TypeFor[Model](), "layer": reflect.TypeFor[Layer]()} {
		for i := range typ.NumField() {
			f := typ.Field(i)
			tag, ok := f.Tag.Lookup("gguf")
			if f.Type == reflect.TypeFor[backend.Tensor]() && !ok {
				t.Errorf("%s.%s holds a weight but has no gguf tag", typ.Name(), f.Name)
			}
			if ok && !named[scope+" "+tag] {
				t.Errorf("%s.%s: tag gguf:%q is no architecture's weight", typ.Name(), f.Name, tag)
			}
		}
	}
}
