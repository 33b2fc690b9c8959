package opencl

import (
	"fmt"
	"math/bits"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/opencl/cl"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/internal/ggmlmath"
)

// A ropeTable holds a RoPE's cos and sin at the positions lo…hi−1: row
// p−lo is the dims/2 pairs (cos, sin) of ggmlmath.RoPECosSin, computed on
// the host with the C library's cosf and sinf, as the CPU backend and
// llama.cpp take them. A device computes neither: its float cos and sin
// are up to 4 ulp off, and even float64's rounded to float (correctly
// rounded but for ties) differ from glibc's, which are not, in about 1% of
// angles; over an f32 cache that last bit of a key reaches the scores (on
// a 1B-shaped Q4_K_M file it flipped activations from the first step).
// The table grows, doubling, to the positions a RoPE is given (which the
// host wrote: tensor.host); a K-shift's negative deltas extend it below 0.
type ropeTable struct {
	key ropeKey
	// thetaScale is ggml's theta^(−2/dims); freqs the host's copy of
	// key.freqs.
	thetaScale float32
	freqs      []float32
	mem        cl.Mem
	lo, hi     int32
}

// ropeKey is what the angles depend on (backend.Rope with its scales).
type ropeKey struct {
	dims                     int
	theta, freqScale, mscale float32
	freqs                    *tensor // a weight: never changes
}

// ropeMinRows is the fewest positions a table holds on either side of 0.
const ropeMinRows = 256

// ropeRows returns the table of r's angles covering the positions
// pos[0…n), growing it when they reach past it, or nil after a failure
// (recorded). A growth queues a write of the whole table: a few times in
// a context, never per token.
func (b *Backend) ropeRows(op string, r backend.Rope, freqs, pos *tensor, n int) *ropeTable {
	vals := pos.hostValues()
	if vals == nil || len(vals) < n {
		b.shape(op, "the positions in %v were not written by WriteI32: RoPE's table needs their range on the host", pos)
		return nil
	}
	lo, hi := int32(0), int32(1)
	for _, p := range vals[:n] {
		lo, hi = min(lo, p), max(hi, p+1)
	}
	freqScale, mscale, _ := r.Scales()
	key := ropeKey{r.Dims, r.Theta, freqScale, mscale, freqs}
	var t *ropeTable
	for _, c := range b.ropes {
		if c.key == key {
			t = c
			break
		}
	}
	if t == nil {
		t = &ropeTable{key: key, thetaScale: ggmlmath.Powf(r.Theta, float32(-2)/float32(r.Dims))}
		if freqs != nil {
			t.freqs = make([]float32, freqs.elems)
			if err := b.q.Read(freqs.mem, 0, 4*freqs.elems, ptr(t.freqs)); err != nil {
				b.fail(fmt.Errorf("opencl: %s: reading rope freqs %v: %w", op, freqs, err))
				return nil
			}
		}
		b.ropes = append(b.ropes, t)
	}
	if t.mem.Valid() && lo >= t.lo && hi <= t.hi {
		return t
	}
	nlo, nhi := min(t.lo, -ceilPow2(-lo, ropeMinRows)), max(t.hi, ceilPow2(hi, ropeMinRows))
	if lo == 0 && t.lo == 0 {
		nlo = 0 // no negative positions yet
	}
	half := r.Dims / 2
	rows := int(nhi - nlo)
	cs := make([]float32, rows*2*half)
	for i := range rows {
		ggmlmath.RoPECosSin(cs[i*2*half:(i+1)*2*half], nlo+int32(i), t.thetaScale, t.freqs, freqScale, mscale)
	}
	m, err := b.ctx.NewBuffer(4 * len(cs))
	if err == nil {
		err = b.q.Write(m, 0, 4*len(cs), ptr(cs))
	}
	if err != nil {
		m.Release()
		b.fail(fmt.Errorf("opencl: %s: rope table of positions [%d, %d): %w", op, nlo, nhi, err))
		return nil
	}
	// Queued kernels that still read the old table keep it alive.
	t.mem.Release()
	t.mem, t.lo, t.hi = m, nlo, nhi
	return t
}

// ceilPow2 is the least power of two ≥ max(v, least) (least a power of two).
func ceilPow2(v int32, least int32) int32 {
	if v <= least {
		return least
	}
	return int32(1) << bits.Len32(uint32(v-1))
}

// hostValues returns the I32 elements the host last wrote to t, when no op
// has written it since (nil otherwise).
func (t *tensor) hostValues() []int32 {
	if t.dt != dtype.I32 || t.host == nil || t.hostVer != t.ver {
		return nil
	}
	return t.host
}
