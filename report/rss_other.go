//go:build !unix

package report

import "os"

// peakRSS is unknown (0) where neither /proc nor getrusage exists.
func peakRSS() int64 { return 0 }

func childPeakRSS(*os.ProcessState) int64 { return 0 }
