//go:build !unix

package gguf

import "os"

// mapFile reads the whole file where mmap is not available.
func mapFile(path string) ([]byte, func([]byte) error, error) {
	data, err := os.ReadFile(path)
	return data, nil, err
}
