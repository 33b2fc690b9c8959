//go:build unix && !darwin

package report

// maxrssBytes converts ru_maxrss, which Linux and the BSDs give in KiB.
func maxrssBytes(v int64) int64 { return v << 10 }
