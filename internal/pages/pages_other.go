//go:build !unix

package pages

func dontNeed([]byte) {}
