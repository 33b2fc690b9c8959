#ifndef GLINT_FLASH_H
#define GLINT_FLASH_H

float glint_flash_weights(int n, const float *d, float scale, float cap, float *ms, float *vs);

#endif
