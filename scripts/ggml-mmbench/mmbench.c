// ggml's MUL_MAT of one weight m×k of a type by n f32 tokens on th threads, repeated: CPU ms
// of the calling thread and wall ms per matmul. With "cold", each repeat takes the next of
// several copies of the weight, together 96 MiB (three times a 32 MiB L3), so that the weight
// comes from memory as in a model (BenchmarkKernelsPrefill's way); else the one weight stays in
// cache as far as it fits. A measuring instrument built against the llama.cpp peer
// (scripts/ggml-mmbench.sh).
// Usage: mmbench F16|Q8_0|Q4_0|Q6_K|Q4_K m k n iters [threads [cold]]
#include "ggml.h"
#include "ggml-cpu.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double tcpu(void){struct timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  if(argc<6){fprintf(stderr,"usage: mmbench F16|Q8_0|Q4_0|Q6_K|Q4_K m k n iters [threads [cold]]\n");return 2;}
  const char*ty=argv[1]; int m=atoi(argv[2]),k=atoi(argv[3]),n=atoi(argv[4]),iters=atoi(argv[5]); int th=argc>6?atoi(argv[6]):1;
  int cold=argc>7&&!strcmp(argv[7],"cold");
  enum ggml_type t=!strcmp(ty,"F16")?GGML_TYPE_F16:!strcmp(ty,"Q8_0")?GGML_TYPE_Q8_0:!strcmp(ty,"Q4_0")?GGML_TYPE_Q4_0:!strcmp(ty,"Q6_K")?GGML_TYPE_Q6_K:GGML_TYPE_Q4_K;
  size_t wbytes=ggml_row_size(t,k)*m;
  int copies=cold?(int)((96u<<20)/wbytes)+1:1;
  ggml_cpu_init();
  struct ggml_init_params ip={ wbytes*copies+(size_t)n*k*4+(size_t)n*m*4*copies+((size_t)64<<20), NULL, false};
  struct ggml_context*ctx=ggml_init(ip);
  struct ggml_tensor*b=ggml_new_tensor_2d(ctx,GGML_TYPE_F32,k,n);
  float*tmp=malloc((size_t)m*k*4); for(size_t i=0;i<(size_t)m*k;i++) tmp[i]=(float)rand()/RAND_MAX-0.5f;
  float*bd=b->data; for(size_t i=0;i<(size_t)n*k;i++) bd[i]=(float)rand()/RAND_MAX-0.5f;
  struct ggml_cgraph**g=malloc(sizeof(*g)*copies);
  for(int c=0;c<copies;c++){
    struct ggml_tensor*a=ggml_new_tensor_2d(ctx,t,k,m);
    ggml_quantize_chunk(t,tmp,a->data,0,m,k,NULL);
    g[c]=ggml_new_graph(ctx); ggml_build_forward_expand(g[c],ggml_mul_mat(ctx,a,b));
  }
  ggml_graph_compute_with_ctx(ctx,g[0],th);
  double t0=tcpu(); struct timespec w0,w1; clock_gettime(CLOCK_MONOTONIC,&w0);
  for(int i=0;i<iters;i++) ggml_graph_compute_with_ctx(ctx,g[(i+1)%copies],th);
  double t1=tcpu(); clock_gettime(CLOCK_MONOTONIC,&w1);
  double wall=(w1.tv_sec-w0.tv_sec)+(w1.tv_nsec-w0.tv_nsec)*1e-9;
  printf("%s %dx%d n=%d%s: cpu %.3f ms/op, wall %.3f ms/op, %.1f GFLOP/s(cpu)\n",ty,m,k,n,cold?" cold":"",(t1-t0)/iters*1e3,wall/iters*1e3,2.0*m*n*k*iters/(t1-t0)*1e-9);
  return 0;}
