package cpu

// Levels names the kernel levels this CPU runs, the portable one first.
func Levels() []string {
	var ls []string
	for _, l := range simdLevels() {
		ls = append(ls, l.String())
	}
	return ls
}
