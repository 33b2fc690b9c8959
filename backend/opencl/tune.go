package opencl

import (
	"fmt"
	"strconv"
	"strings"
)

// tuning is a parsed Options.Tune: a program variant and launch shapes other
// than the ones New picks for the device, for benchmarks that sweep them.
// None changes a result's bits: every variant is held to the portable
// kernels' bits (TestOtherVariants, TestFastPaths), and a GEMM work-group
// of fewer items only cuts the tile into more groups (each output's sum
// stays one work-item's, in the same order).
type tuning struct {
	class     string // "", "cpu" or "gpu": the kernels' device class
	portable  bool   // no vendor fast paths
	noDot4    bool
	noSubgrp  bool
	noFP16    bool
	gemmItems int // most work-items of an mmt_T group (0: 256)
}

// parseTune reads Options.Tune: a comma-separated list of
//
//	native        the device's class and every fast path it offers (the default)
//	portable      no vendor fast path (DOT4_KHR, SUBGROUPS, FP16)
//	no-dot4, no-subgroups, no-fp16   one fast path fewer
//	cpu, gpu      the CPU-device kernels (register tiles, one work-item per
//	              row) or the GPU ones (lanes per row, the local-memory GEMM)
//	gemm=N        prompt GEMM (mmt_T) work-groups of at most N work-items,
//	              a power of two from 16 to 256 (default 256)
func parseTune(s string) (tuning, error) {
	var t tuning
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "" || f == "native":
		case f == "portable":
			t.portable = true
		case f == "no-dot4":
			t.noDot4 = true
		case f == "no-subgroups":
			t.noSubgrp = true
		case f == "no-fp16":
			t.noFP16 = true
		case f == "cpu" || f == "gpu":
			if t.class != "" && t.class != f {
				return tuning{}, fmt.Errorf("opencl: tune %q: both cpu and gpu", s)
			}
			t.class = f
		case strings.HasPrefix(f, "gemm="):
			n, err := strconv.Atoi(strings.TrimPrefix(f, "gemm="))
			if err != nil || n < 16 || n > 256 || n&(n-1) != 0 {
				return tuning{}, fmt.Errorf("opencl: tune %q: %q wants a power of two from 16 to 256", s, f)
			}
			t.gemmItems = n
		default:
			return tuning{}, fmt.Errorf("opencl: tune %q: unknown %q (want native, portable, no-dot4, no-subgroups, no-fp16, cpu, gpu or gemm=N)", s, f)
		}
	}
	return t, nil
}

// apply is v (the device's native variant) as t asks.
func (t tuning) apply(v variant) variant {
	switch t.class {
	case "cpu":
		v.cpu = true
	case "gpu":
		v.cpu = false
	}
	if t.portable {
		v = v.portable()
	}
	v.intDot = v.intDot && !t.noDot4
	v.subgroups = v.subgroups && !t.noSubgrp
	v.fp16 = v.fp16 && !t.noFP16
	return v
}
