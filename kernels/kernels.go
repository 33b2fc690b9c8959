// Package kernels holds glint's OpenCL C sources (OpenCL C 1.2, no
// extensions required), embedded in the binary. The OpenCL backend builds
// them as one program; the files are split by topic only for reading.
package kernels

import (
	_ "embed"
	"strings"
)

var (
	//go:embed common.cl
	common string
	//go:embed weights.cl
	weights string
	//go:embed matmul.cl
	matmul string
	//go:embed quant.cl
	quant string
	//go:embed gemm.cl
	gemm string
	//go:embed norm.cl
	norm string
	//go:embed rope.cl
	rope string
	//go:embed elementwise.cl
	elementwise string
	//go:embed attention.cl
	attention string
	//go:embed kvquant.cl
	kvquant string
	//go:embed flash.cl
	flash string
	//go:embed fused.cl
	fused string
)

// File is one source file.
type File struct {
	Name, Text string
}

// Files returns the sources in the order they are joined: helpers first,
// since OpenCL C needs declarations before use.
func Files() []File {
	return []File{
		{"common.cl", common},
		{"weights.cl", weights},
		{"matmul.cl", matmul},
		{"quant.cl", quant},
		{"gemm.cl", gemm},
		{"norm.cl", norm},
		{"rope.cl", rope},
		{"elementwise.cl", elementwise},
		{"attention.cl", attention},
		{"kvquant.cl", kvquant},
		{"flash.cl", flash},
		{"fused.cl", fused},
	}
}

// Source returns every kernel source joined into one program, each file
// preceded by a #line directive so that compiler messages name the file.
func Source() string {
	var b strings.Builder
	for _, f := range Files() {
		b.WriteString("#line 1 \"" + f.Name + "\"\n")
		b.WriteString(f.Text)
		b.WriteString("\n")
	}
	return b.String()
}
