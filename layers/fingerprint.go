package layers

import (
	"encoding/binary"
	"fmt"
	"hash"
	"hash/fnv"

	"github.com/glint-llm/glint/model"
)

// fingerprint identifies a model's weights for the KV states it writes: a
// state is loaded only into the model it came from. It hashes the
// hyper-parameters, every tensor's name, type and shape, and samples of
// its bytes (the first and last 256 and 256 from the middle), which tells
// two files of one shape apart without reading all of them.
type fingerprint struct{ h hash.Hash64 }

func newFingerprint(c model.Config) fingerprint {
	f := fingerprint{fnv.New64a()}
	fmt.Fprintf(f.h, "%+v\n", c)
	return f
}

func (f fingerprint) tensor(td model.TensorData) {
	fmt.Fprintf(f.h, "%s %v %v %d\n", td.Name, td.Type, td.Shape, len(td.Data))
	const sample = 256
	d := td.Data
	if len(d) <= 3*sample {
		f.h.Write(d)
		return
	}
	f.h.Write(d[:sample])
	f.h.Write(d[len(d)/2 : len(d)/2+sample])
	f.h.Write(d[len(d)-sample:])
}

func (f fingerprint) sum() uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], f.h.Sum64())
	return binary.LittleEndian.Uint64(b[:])
}
