#ifndef GLINT_FLASH_H
#define GLINT_FLASH_H

#include <stddef.h>
#include <stdint.h>

float glint_flash_weights(int n, const float *d, float scale, float cap, float *ms, float *vs);

// The SIMD parts of flashGroup (flash.go), its bits; they need AVX2, FMA
// and F16C. See flash.c.
void glint_flash_f16_dots(int wide, int hd, int group, const float *q, const uint8_t *k, size_t cellBytes,
                          const int32_t *cells, int nv, float *kf, float *d);
int glint_flash_values(int vtype, int hd, int group, const uint8_t *v, size_t cellBytes, const int32_t *cells, int nv,
                       const float *ms, const float *vs, float *acc, uint16_t *acc16, float *vrow);

#endif
