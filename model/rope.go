package model

import "math"

// RopeScaling is Llama 3's frequency scaling (Hugging Face rope_scaling with
// rope_type "llama3").
type RopeScaling struct {
	Factor          float64 // e.g. 32
	LowFreqFactor   float64 // e.g. 1
	HighFreqFactor  float64 // e.g. 4
	OriginalContext int     // original_max_position_embeddings, e.g. 8192
}

// Llama3RopeFreqs computes rope_freqs.weight, the per-pair divisors of the
// rotation frequencies, for a head of dims rotated dimensions, as
// convert_hf_to_gguf.py does: wavelengths shorter than
// OriginalContext/HighFreqFactor keep their frequency, those longer than
// OriginalContext/LowFreqFactor are divided by Factor, and the band between
// is interpolated. The converter computes in float32 torch tensors (Python
// scalars are cast to float32 per operation), and so does this, so that the
// result matches its bits.
func Llama3RopeFreqs(dims int, theta float64, s RopeScaling) []float32 {
	lowWavelen := float32(float64(s.OriginalContext) / s.LowFreqFactor)
	highWavelen := float32(float64(s.OriginalContext) / s.HighFreqFactor)
	factor := float32(s.Factor)
	low, high := float32(s.LowFreqFactor), float32(s.HighFreqFactor)
	orig := float32(s.OriginalContext)
	out := make([]float32, dims/2)
	for i := range out {
		e := float32(float32(2*i) / float32(dims))
		freq := float32(1 / float32(math.Pow(float64(float32(theta)), float64(e))))
		wavelen := float32(float32(2*math.Pi) / freq)
		switch {
		case wavelen < highWavelen:
			out[i] = 1
		case wavelen > lowWavelen:
			out[i] = factor
		default:
			smooth := float32(float32(float32(orig/wavelen)-low) / float32(high-low))
			out[i] = float32(1 / float32(float32(float32(1-smooth)/factor)+smooth))
		}
	}
	return out
}
