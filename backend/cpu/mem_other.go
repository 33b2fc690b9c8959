//go:build !linux

package cpu

// hugePage is the copy's alignment where no huge-page advice is available.
const hugePage = 64

// mapping is backend-owned weight memory; off Linux it is ordinary Go memory.
type mapping struct {
	data []byte
}

func mapAnon(n int) (*mapping, error) {
	raw := make([]byte, n+hugePage)
	off := 0
	if r := addrOf(raw) % hugePage; r != 0 {
		off = int(hugePage - r)
	}
	return &mapping{data: raw[off : off+n : off+n]}, nil
}

func (m *mapping) unmap() error {
	m.data = nil
	return nil
}
