//go:build race

package main

// raceEnabled: the test binary runs under the race detector, whose shadow
// memory multiplies a process's RSS.
const raceEnabled = true
