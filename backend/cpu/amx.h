// Declarations of the AMX prefill kernels in amx.c, called from amx_cgo.go.
#include <stddef.h>
#include <stdint.h>

// glint_amx_init reports whether the CPU has AMX-TILE and AMX-INT8 (with
// AVX-512) and the OS has granted this process the tile data state; it
// asks for that grant, once per process.
int glint_amx_init(void);

// glint_matmat_amx computes dst[t*m + o] = x[t] · row o of the Q4_0 or Q8_0
// weight w for t < n and lo <= o < hi, from the quantised activations as
// glint_matmat_q takes them (q: n rows of k int8; d and c: a scale and a
// correction per 32-element block). It returns 0, having done nothing, when
// its working memory cannot be allocated.
int glint_matmat_amx(int type, const int8_t *q, const float *d, const int32_t *c, int n, int k, const uint8_t *w,
                     size_t rowBytes, int lo, int hi, float *dst, int m);
