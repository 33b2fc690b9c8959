// Declarations of the C kernels in simd.c, called from simd_cgo.go.
#include <stddef.h>
#include <stdint.h>

// glint_simd_level is 2 with AVX-512 (F, BW, VL, DQ) plus AVX2/FMA/F16C, 1
// with AVX2/FMA/F16C alone, 0 otherwise.
int glint_simd_level(void);

// glint_matvec computes dst[o] = x · row o of w for lo <= o < hi.
void glint_matvec(int level, int type, const float *x, const uint8_t *w, size_t rowBytes, int k, int lo, int hi,
                  float *dst);

// glint_matmat computes dst[t*m + o] = x[t] · row o of w for t < n and
// lo <= o < hi.
void glint_matmat(int level, int type, const float *x, int n, int k, const uint8_t *w, size_t rowBytes, int lo,
                  int hi, float *dst, int m);
