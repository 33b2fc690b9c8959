package report

// maxrssBytes converts ru_maxrss, which macOS gives in bytes.
func maxrssBytes(v int64) int64 { return v }
