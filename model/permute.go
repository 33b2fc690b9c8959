package model

import "fmt"

// PermuteQK reorders the rows of a Hugging Face Q or K projection ([heads ·
// headDim, in], any row type) into the order GGUF llama files store:
// convert_hf_to_gguf.py's permute(w, n_head), i.e. w.reshape(n_head, 2,
// headDim/2, in).swapaxes(1, 2). It turns rotate-half (NeoX) RoPE pairs
// (i, i+headDim/2) into adjacent pairs (2i, 2i+1). For K, nHead is the number
// of KV heads.
func PermuteQK(data []byte, rows, nHead int) ([]byte, error) {
	return permuteRows(data, rows, nHead, false)
}

// UnpermuteQK is the inverse of PermuteQK: GGUF row order back to Hugging
// Face's.
func UnpermuteQK(data []byte, rows, nHead int) ([]byte, error) {
	return permuteRows(data, rows, nHead, true)
}

func permuteRows(data []byte, rows, nHead int, inverse bool) ([]byte, error) {
	if rows <= 0 || nHead <= 0 || rows%(2*nHead) != 0 || len(data)%rows != 0 {
		return nil, fmt.Errorf("model: cannot permute %d bytes as %d rows of %d heads", len(data), rows, nHead)
	}
	rb := len(data) / rows
	hd := rows / nHead
	half := hd / 2
	out := make([]byte, len(data))
	for h := 0; h < nHead; h++ {
		for i := 0; i < half; i++ {
			for j := 0; j < 2; j++ {
				g := h*hd + 2*i + j    // GGUF row
				f := h*hd + j*half + i // Hugging Face row
				if inverse {
					g, f = f, g
				}
				copy(out[g*rb:(g+1)*rb], data[f*rb:(f+1)*rb])
			}
		}
	}
	return out, nil
}
