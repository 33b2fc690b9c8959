// The online softmax of flash attention (flash.go), in C so that one call
// runs a row's whole sequence of the C library's expf and tanhf (a cgo call
// per cell would cost more than the cell).
#include <math.h>

#include "flash.h"

// glint_flash_weights runs ggml_compute_forward_flash_attn_ext_f16's
// softmax over n raw dot products d: s = d·scale (then cap·tanhf(s) when
// cap is not 0); on a new maximum ms = expf(Mold − M) and vs = 1, else
// ms = 1 and vs = expf(s − M); S = S·ms + vs. It stores each cell's ms and
// vs and returns S. This file is built without FMA, so S·ms + vs rounds
// twice, as in llama.cpp's build.
float glint_flash_weights(int n, const float *d, float scale, float cap, float *ms, float *vs) {
	float S = 0.0f, M = -INFINITY;
	for (int i = 0; i < n; i++) {
		float s = d[i] * scale;
		if (cap != 0.0f) {
			s = cap * tanhf(s);
		}
		float m1 = 1.0f, v1 = 1.0f;
		if (s > M) {
			const float Mold = M;
			M = s;
			m1 = expf(Mold - M);
		} else {
			v1 = expf(s - M);
		}
		ms[i] = m1;
		vs[i] = v1;
		S = S * m1 + v1;
	}
	return S;
}
