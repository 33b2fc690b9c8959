//go:build race

package quant_test

// raceEnabled: the race detector slows the quantisers' float loops about
// tenfold, and the peer comparison checks values, not concurrency.
const raceEnabled = true
