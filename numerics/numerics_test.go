package numerics

import (
	"os"
	"testing"

	"github.com/glint-llm/glint/dtype"
)

const (
	f16  = dtype.F16
	bf16 = dtype.BF16
)

func TestParseLevel(t *testing.T) {
	for _, c := range []struct {
		in         string
		host, want Level
		err        bool
	}{
		{"", AVX512, AVX512, false},
		{"off", AVX512, Go, false},
		{"go", AVX2, Go, false},
		{"avx2", AVX512, AVX2, false},
		{"avx512", AVX2, AVX2, false},
		{"avx512", Go, Go, false},
		{"avx512vnni", VNNI, VNNI, false},
		{"vnni", AVX512, AVX512, false},
		{"", VNNI, VNNI, false},
		{"avx512vbmi", VBMI, VBMI, false},
		{"vbmi", VNNI, VNNI, false},
		{"amx", VBMI, VBMI, true},
		{"sse", AVX2, AVX2, true},
	} {
		got, err := ParseLevel(c.in, Host{Level: c.host})
		if got != c.want || (err != nil) != c.err {
			t.Errorf("ParseLevel(%q, %v) = %v, %v; want %v, error %v", c.in, c.host, got, err, c.want, c.err)
		}
	}
}

// TestParseFlavour checks which flavour each name selects on hosts with and
// without AVX-512 and AVX512_BF16: "" the host's native build, a name that
// build whatever the host.
func TestParseFlavour(t *testing.T) {
	for _, c := range []struct {
		in   string
		host Host
		want Flavour
		err  bool
	}{
		{"", Host{Level: AVX2}, FlavourAVX2, false},
		{"", Host{Level: Go}, FlavourAVX2, false},
		{"", Host{Level: AVX512}, FlavourAVX512, false},
		{"", Host{Level: VBMI}, FlavourAVX512, false},
		{"", Host{Level: VBMI, BF16: true}, FlavourAVX512BF16, false},
		{"avx2", Host{Level: VBMI, BF16: true}, FlavourAVX2, false},
		{"avx512", Host{Level: VBMI, BF16: true}, FlavourAVX512, false},
		{"avx512", Host{Level: AVX2}, FlavourAVX512, false},
		{"avx512", Host{Level: Go}, FlavourAVX512, false},
		{"avx512bf16", Host{Level: AVX2}, FlavourAVX512BF16, false},
		{"avx512bf16", Host{Level: Go}, FlavourAVX512BF16, false},
		{"AVX2", Host{Level: AVX2}, FlavourAVX2, true},
		{"neon", Host{Level: AVX512}, FlavourAVX512, true},
	} {
		got, err := ParseFlavour(c.in, c.host)
		if got != c.want || (err != nil) != c.err {
			t.Errorf("ParseFlavour(%q, %+v) = %v, %v; want %v, error %v", c.in, c.host, got, err, c.want, c.err)
		}
		if err == nil {
			if g, w := got.Wide(), c.want != FlavourAVX2; g != w {
				t.Errorf("%v: Wide %v, want %v", got, g, w)
			}
			if g, w := got.BF16(), c.want == FlavourAVX512BF16; g != w {
				t.Errorf("%v: BF16 %v, want %v", got, g, w)
			}
			if back, err := ParseFlavour(got.String(), Host{}); back != got || err != nil {
				t.Errorf("ParseFlavour(%q) = %v, %v: not its own name", got.String(), back, err)
			}
		}
	}
}

// TestFloatOrder checks each flavour's order against llamafile_sgemm's
// conditions (n ≥ 2, k a multiple of the vector's floats, rows a multiple
// of 4) and the lanes each order keeps.
func TestFloatOrder(t *testing.T) {
	for _, c := range []struct {
		f       Flavour
		bf16    bool // BF16 weights (else F16)
		n, k, m int
		want    Order
		lanes   int
	}{
		{FlavourAVX2, false, 1, 64, 8, SumVec8, 32},
		{FlavourAVX2, false, 3, 72, 8, SumTiny8, 8},
		{FlavourAVX2, false, 3, 64, 9, SumVec8, 32},
		{FlavourAVX2, false, 3, 100, 8, SumVec8, 32},
		{FlavourAVX512, false, 3, 72, 8, SumVec16, 64},
		{FlavourAVX512, false, 3, 64, 8, SumTiny16, 16},
		{FlavourAVX512, true, 1, 64, 8, SumVec16, 32},
		{FlavourAVX512BF16, false, 3, 64, 8, SumTiny16, 16},
		{FlavourAVX512BF16, true, 3, 64, 8, SumTinyBF16, 32},
		{FlavourAVX512BF16, true, 3, 48, 8, SumVecBF16, 64},
		{FlavourAVX512BF16, true, 1, 64, 8, SumVecBF16, 64},
	} {
		typ := f16
		if c.bf16 {
			typ = bf16
		}
		got := c.f.FloatOrder(typ, c.n, c.k, c.m)
		if got != c.want || got.Lanes(typ) != c.lanes || got.Paired() != (c.want == SumVecBF16 || c.want == SumTinyBF16) {
			t.Errorf("%v %v n=%d k=%d m=%d: order %d (%d lanes), want %d (%d lanes)", c.f, typ, c.n, c.k, c.m, got, got.Lanes(typ), c.want, c.lanes)
		}
	}
}

// TestFromEnv checks that FromEnv reads the two variables and nothing else
// chooses for the backends.
func TestFromEnv(t *testing.T) {
	t.Setenv(LevelEnv, "avx2")
	t.Setenv(FlavourEnv, "avx512")
	if got, want := FromEnv(), (Options{Level: "avx2", Flavour: "avx512"}); got != want {
		t.Errorf("FromEnv() = %+v, want %+v", got, want)
	}
	os.Unsetenv(LevelEnv)
	os.Unsetenv(FlavourEnv)
	s, err := FromEnv().Resolve(HostCPU())
	if err != nil || s.Level != HostCPU().Level || s.Flavour != HostCPU().Flavour() {
		t.Errorf("unset: %+v, %v; want the host's %+v", s, err, HostCPU())
	}
}
