//go:build cgo && amd64

package numerics

// #include <stdint.h>
//
// static int numerics_level(void) {
// 	__builtin_cpu_init();
// 	if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))) {
// 		return 0;
// 	}
// 	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
// 	    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
// 		if (!__builtin_cpu_supports("avx512vnni")) {
// 			return 2;
// 		}
// 		return __builtin_cpu_supports("avx512vbmi") ? 4 : 3;
// 	}
// 	return 1;
// }
//
// static int numerics_bf16(void) {
// 	__builtin_cpu_init();
// 	return __builtin_cpu_supports("avx512bf16");
// }
import "C"

// The C compiler's cpuid checks are the ones the CPU backend's kernels are
// compiled against (target attributes), so they decide what may run.
func detectLevel() Level { return Level(C.numerics_level()) }

func detectBF16() bool { return C.numerics_bf16() != 0 }
