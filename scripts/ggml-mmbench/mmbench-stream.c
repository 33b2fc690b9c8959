// ggml's MUL_MAT of enough copies of a weight m×k to fill 256 MiB, each by the same n f32
// tokens, in one graph on th threads: as a decode streams its weights from memory. Wall ms per
// matmul and GB/s. A measuring instrument built against the llama.cpp peer (scripts/ggml-mmbench.sh).
// Usage: mmbench-stream F16|Q8_0|Q4_0|Q6_K|Q4_K m k n iters [threads]
#include "ggml.h"
#include "ggml-cpu.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
int main(int argc,char**argv){
  const char*ty=argv[1]; int m=atoi(argv[2]),k=atoi(argv[3]),n=atoi(argv[4]),iters=atoi(argv[5]); int th=argc>6?atoi(argv[6]):1;
  enum ggml_type t=!strcmp(ty,"F16")?GGML_TYPE_F16:!strcmp(ty,"Q8_0")?GGML_TYPE_Q8_0:!strcmp(ty,"Q4_0")?GGML_TYPE_Q4_0:!strcmp(ty,"Q6_K")?GGML_TYPE_Q6_K:GGML_TYPE_Q4_K;
  ggml_cpu_init();
  size_t rb=ggml_row_size(t,k)*m; int C=(int)((256u<<20)/rb)+1;
  struct ggml_init_params ip={ rb*C+(size_t)n*k*4+(size_t)C*n*m*4+((size_t)64<<20), NULL, false};
  struct ggml_context*ctx=ggml_init(ip);
  struct ggml_tensor*b=ggml_new_tensor_2d(ctx,GGML_TYPE_F32,k,n);
  float*tmp=malloc((size_t)m*k*4); for(size_t i=0;i<(size_t)m*k;i++) tmp[i]=(float)rand()/RAND_MAX-0.5f;
  float*bd=b->data; for(size_t i=0;i<(size_t)n*k;i++) bd[i]=(float)rand()/RAND_MAX-0.5f;
  struct ggml_cgraph*g=ggml_new_graph_custom(ctx,4096,false);
  for(int c=0;c<C;c++){struct ggml_tensor*a=ggml_new_tensor_2d(ctx,t,k,m); ggml_quantize_chunk(t,tmp,a->data,0,m,k,NULL); ggml_build_forward_expand(g,ggml_mul_mat(ctx,a,b));}
  ggml_graph_compute_with_ctx(ctx,g,th);
  struct timespec w0,w1; clock_gettime(CLOCK_MONOTONIC,&w0);
  for(int i=0;i<iters;i++) ggml_graph_compute_with_ctx(ctx,g,th);
  clock_gettime(CLOCK_MONOTONIC,&w1);
  double wall=(w1.tv_sec-w0.tv_sec)+(w1.tv_nsec-w0.tv_nsec)*1e-9;
  printf("%s %dx%d n=%d t=%d (%d copies): wall %.3f ms/matmul, %.1f GB/s\n",ty,m,k,n,th,C,wall/iters/C*1e3,rb*(double)C*iters/wall*1e-9);
  return 0;}
