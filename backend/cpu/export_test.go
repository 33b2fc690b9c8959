package cpu

// NewAtLevel is New(threads) running the kernel level that GLINT_CPU_SIMD
// would name (capped to what this CPU runs), for tests outside the package.
func NewAtLevel(threads int, level string) (*Backend, error) {
	l, err := parseSIMD(level, hostSIMD)
	if err != nil {
		return nil, err
	}
	b := New(threads)
	b.simd = l
	return b, nil
}

// Levels names the kernel levels this CPU runs, the portable one first.
func Levels() []string {
	var ls []string
	for _, l := range simdLevels() {
		ls = append(ls, l.String())
	}
	return ls
}
