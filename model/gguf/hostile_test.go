package gguf

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/glint-llm/glint/dtype"
)

// hostileCases are malformed files, each with the error it must produce.
func hostileCases() []struct {
	name string
	data []byte
	want string
} {
	kv1 := func() *enc { return header(3, 0, 1) }
	align := func(write func(e *enc)) []byte {
		e := kv1().str("general.alignment")
		write(e)
		return e.b
	}
	// oneTensor is a file with one tensor info and 32 bytes of data.
	oneTensor := func(dims []uint64, typ uint32, off uint64) []byte {
		e := header(3, 1, 0).tensorInfo("t", dims, typ, off)
		return e.pad(32).raw(make([]byte, 32)...).b
	}
	nest := kv1().str("k").u32(9)
	for range maxDepth {
		nest.u32(9).u64(1)
	}
	nest.u32(4).u64(0)

	pastEnd := header(3, 1, 0).tensorInfo("blk.0.attn_q.weight", []uint64{8}, 0, 32)
	dataOff := (len(pastEnd.b) + 31) / 32 * 32
	pastEnd.pad(32).raw(make([]byte, 32)...)

	return []struct {
		name string
		data []byte
		want string
	}{
		{"wrong magic", append([]byte("GGML"), header(3, 0, 0).b[4:]...), `not a GGUF file: magic "GGML"`},
		{"version 1", header(1, 0, 0).b, "GGUF version 1 is not supported"},
		{"version 4", header(4, 0, 0).b, "unsupported GGUF version 4"},
		{"big-endian", (&enc{b: []byte("GGUF")}).raw(0, 0, 0, 3).u64(0).u64(0).b, "big-endian GGUF (version 3)"},
		{"huge n_kv", header(3, 0, 1<<60).b, "header: metadata pair count 1152921504606846976 exceeds what the 0 bytes left can hold beside 0 tensors"},
		{"n_kv beside tensors", header(3, 1, 4).raw(make([]byte, 60)...).b, "header: metadata pair count 4 exceeds what the 60 bytes left can hold beside 1 tensors"},
		{"huge n_tensors", header(3, 1<<62, 0).raw(make([]byte, 100)...).b, "header: tensor count 4611686018427387904 exceeds what the 100 bytes left can hold (24 bytes each at least)"},
		{"huge key length", kv1().u64(1 << 63).raw(make([]byte, 20)...).b, "metadata pair 0: key: string of 9223372036854775808 bytes: unexpected end of file"},
		{"huge string value", kv1().str("k").u32(8).u64(1 << 63).b, `key "k": string of 9223372036854775808 bytes: unexpected end of file: 9223372036854775808 bytes needed at offset 45 (size 45)`},
		{"2^60 strings", kv1().str("tokenizer.ggml.tokens").u32(9).u32(8).u64(1 << 60).str("a").b, `key "tokenizer.ggml.tokens": array of 1152921504606846976 STRING at offset 69 cannot fit in the 9 bytes left`},
		{"2^62 uint64s", kv1().str("k").u32(9).u32(10).u64(1 << 62).u64(0).b, "array of 4611686018427387904 UINT64"},
		{"2^61 arrays", kv1().str("k").u32(9).u32(9).u64(1 << 61).u64(0).b, "array of 2305843009213693952 ARRAY"},
		{"long string in array", kv1().str("k").u32(9).u32(8).u64(2).str("a").u64(1 << 40).b, `key "k": array element 1: string of 1099511627776 bytes: unexpected end of file`},
		{"unknown value type", kv1().str("k").u32(13).u32(0).b, `key "k": unknown value type 13`},
		{"unknown element type", kv1().str("k").u32(9).u32(99).u64(0).b, `key "k": array of unknown element type 99`},
		{"nested too deep", nest.b, "arrays nested more than 8 deep"},
		{"duplicate key", header(3, 0, 2).str("a").u32(0).u8(1).str("a").u32(0).u8(2).b, `key "a": duplicate (pair 1 at offset 38)`},
		{"alignment 0", align(func(e *enc) { e.u32(4).u32(0) }), `key "general.alignment": 0 is not a power of two`},
		{"alignment 48", align(func(e *enc) { e.u32(4).u32(48) }), `key "general.alignment": 48 is not a power of two`},
		{"alignment negative", align(func(e *enc) { e.u32(5).u32(0xffffffe0) }), `key "general.alignment": INT32 -32 is not an unsigned integer`},
		{"alignment string", align(func(e *enc) { e.u32(8).str("32") }), `key "general.alignment": STRING 32 is not an unsigned integer`},
		{"alignment 2^31", align(func(e *enc) { e.u32(4).u32(1 << 31) }), "2147483648 is too large"},
		{"5 dims", oneTensor([]uint64{1, 1, 1, 1, 1}, 0, 0), `tensor "t": 5 dimensions, at most 4 are supported`},
		{"unsupported type", oneTensor([]uint64{32}, 16, 0), `tensor "t": type IQ2_XXS (16) is not supported (supported: F32, F16, Q4_0, Q4_1,`},
		{"retired type", oneTensor([]uint64{32}, 4, 0), `tensor "t": type Q4_2 (4) is not supported`},
		{"type past the table", oneTensor([]uint64{32}, 1<<31, 0), `tensor "t": type 2147483648, which ggml does not define, is not supported`},
		{"partial block", oneTensor([]uint64{33}, 2, 0), `tensor "t": dims [33]: dtype: Q4_0 row of 33 elements is not a multiple of the block size 32`},
		{"size overflow", oneTensor([]uint64{1 << 40, 1 << 40}, 0, 0), `tensor "t": dims [1099511627776 1099511627776]: dtype: F32 tensor [1099511627776 1099511627776] overflows`},
		{"dim past int", oneTensor([]uint64{1, 1 << 63}, 0, 0), `tensor "t": dimension 1 is 9223372036854775808`},
		{"misaligned offset", oneTensor([]uint64{4}, 0, 4), `tensor "t": offset 4 is not a multiple of the alignment 32`},
		{"offset past end", pastEnd.b, fmt.Sprintf(`tensor "blk.0.attn_q.weight": data [%d, %d) past end of file (size %d)`, dataOff+32, dataOff+64, dataOff+32)},
		{"huge offset", oneTensor([]uint64{4}, 0, 1<<64-32), `past end of file`},
		{"huge name", header(3, 1, 0).u64(1 << 62).raw(make([]byte, 30)...).b, "tensor 0: name: string of 4611686018427387904 bytes"},
		{"duplicate tensor", header(3, 2, 0).tensorInfo("t", []uint64{4}, 0, 0).tensorInfo("t", []uint64{4}, 0, 0).pad(32).raw(make([]byte, 32)...).b, `tensor "t": duplicate name`},
	}
}

func TestHostile(t *testing.T) {
	for _, c := range hostileCases() {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse(c.data)
			if err == nil {
				t.Fatalf("parsed: %+v", f)
			}
			if !strings.HasPrefix(err.Error(), "gguf: <buffer>: ") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %q\nwant it to contain %q", err, c.want)
			}
		})
	}
}

func TestTruncationIsUnexpectedEOF(t *testing.T) {
	data := sampleFile(t)
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	// Cut inside the metadata: the error says so in errors.Is terms too.
	for n := 0; n < int(f.DataOffset)-32; n += 7 {
		if _, err := Parse(data[:n]); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("prefix %d: %v does not wrap io.ErrUnexpectedEOF", n, err)
		}
	}
}

// TestEdgesAccepted covers unusual files that are valid.
func TestEdgesAccepted(t *testing.T) {
	deep := header(3, 0, 1).str("k").u32(9)
	for range maxDepth - 1 {
		deep.u32(9).u64(1)
	}
	deep.u32(4).u64(0)
	cases := []struct {
		name string
		data []byte
		test func(*File) error
	}{
		{"version 2", header(2, 0, 0).b, func(f *File) error {
			if f.Version != 2 {
				return fmt.Errorf("version %d", f.Version)
			}
			return nil
		}},
		{"arrays 8 deep", deep.b, func(f *File) error {
			v, _ := f.Get("k")
			for d := 1; v.Type == TypeArray && v.Elem == TypeArray; d++ {
				a, _ := v.Array()
				v = a[0]
			}
			if v.Elem != TypeUint32 || v.Len() != 0 {
				return fmt.Errorf("innermost %v", v.describe())
			}
			return nil
		}},
		{"zero-size tensor at end", header(3, 1, 0).tensorInfo("z", []uint64{0, 5}, 0, 0).pad(32).b, func(f *File) error {
			d, ti, err := f.TensorData("z")
			if err != nil || len(d) != 0 || ti.Size != 0 {
				return fmt.Errorf("%v %d %+v", err, len(d), ti)
			}
			return nil
		}},
		{"vocab-only without trailing padding", header(3, 0, 1).str("a").u32(0).u8(9).b, func(f *File) error {
			if f.DataOffset != 64 || f.Size != 38 {
				return fmt.Errorf("data offset %d size %d", f.DataOffset, f.Size)
			}
			return nil
		}},
		{"alignment as UINT64", header(3, 1, 1).str("general.alignment").u32(10).u64(64).tensorInfo("t", []uint64{2}, 0, 0).pad(64).raw(make([]byte, 8)...).b, func(f *File) error {
			if f.Alignment != 64 || f.DataOffset != 128 {
				return fmt.Errorf("alignment %d data offset %d", f.Alignment, f.DataOffset)
			}
			return nil
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse(c.data)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.test(f); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestUnsupportedTypesNamed: every ggml type id glint cannot read is
// refused with ggml's name for it and its id (never a bare number), and
// every id it can read parses.
func TestUnsupportedTypesNamed(t *testing.T) {
	for id := uint32(0); id < 40; id++ {
		typ := dtype.Type(id)
		e := header(3, 1, 0).tensorInfo("blk.0.ffn_down.weight", []uint64{uint64(typ.BlockSize())}, id, 0)
		data := e.pad(32).raw(make([]byte, 32+typ.BlockBytes())...).b
		_, err := Parse(data)
		if typ.Known() {
			if err != nil {
				t.Errorf("%v (%d): %v", typ, id, err)
			}
			continue
		}
		want := fmt.Sprintf(`tensor "blk.0.ffn_down.weight": type %v (%d) is not supported (supported: %s)`, typ, id, dtype.KnownNames())
		if id == 39 {
			want = `type 39, which ggml does not define, is not supported`
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("id %d: err = %v\nwant it to contain %q", id, err, want)
		}
		if strings.Contains(fmt.Sprint(err), "ggml_type(") {
			t.Errorf("id %d: %v shows a bare number", id, err)
		}
	}
}

// allocated is the bytes f allocates, from runtime.MemStats.TotalAlloc.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHostileCountsAllocateLittle: counts in a small file that claim
// millions of tensors, pairs, array elements or string bytes are refused
// before anything is sized by them. Parse allocates as a small multiple of
// the input, so 64 MiB is far above what refusing a kilobyte file takes and
// far below what believing any of these counts would.
func TestHostileCountsAllocateLittle(t *testing.T) {
	const limit = 64 << 20
	filler := make([]byte, 1024)
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"1e7 tensors", header(3, 1e7, 0).raw(filler...).b, "header: tensor count 10000000 exceeds what the 1024 bytes left can hold"},
		{"1e7 metadata pairs", header(3, 0, 1e7).raw(filler...).b, "header: metadata pair count 10000000 exceeds what the 1024 bytes left can hold"},
		{"1e7 UINT64s", header(3, 0, 1).str("k").u32(9).u32(10).u64(1e7).raw(filler...).b, `key "k": array of 10000000 UINT64 at offset 49 cannot fit in the 1024 bytes left`},
		{"1e7 strings", header(3, 0, 1).str("tokenizer.ggml.tokens").u32(9).u32(8).u64(1e7).raw(filler...).b, "array of 10000000 STRING"},
		{"1e7 nested arrays", header(3, 0, 1).str("k").u32(9).u32(9).u64(1e7).raw(filler...).b, "array of 10000000 ARRAY"},
		{"1e9-byte string", header(3, 0, 1).str("k").u32(8).u64(1e9).raw(filler...).b, `key "k": string of 1000000000 bytes: unexpected end of file`},
		{"1e9-byte tensor name", header(3, 1, 0).u64(1e9).raw(filler...).b, "tensor 0: name: string of 1000000000 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = Parse(c.data) })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, c.want)
			}
			if n > limit {
				t.Fatalf("refusing %d bytes allocated %d bytes", len(c.data), n)
			}
		})
	}
}

// TestArrayStringDecodesAFew: a wrong-typed array's error message shows
// its first elements without decoding them all (a Value per element would
// be some 70 times the file).
func TestArrayStringDecodesAFew(t *testing.T) {
	const n = 1 << 22
	data := header(3, 0, 1).str("general.alignment").u32(9).u32(0).u64(n).raw(make([]byte, n)...).b
	var err error
	got := allocated(func() { _, err = Parse(data) })
	want := `key "general.alignment": ARRAY of UINT8 [0 0 0 0 0 0 0 0 … (4194304 UINT8)] is not an unsigned integer`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v\nwant it to contain %q", err, want)
	}
	// The parse keeps one copy of the array (4 MiB); decoding it whole would
	// take some 300 MiB.
	if got > 3*n {
		t.Fatalf("allocated %d bytes for a %d-byte array", got, n)
	}
}
