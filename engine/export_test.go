package engine

import "time"

// SetGather makes every step wait up to d for the sessions of the last one
// (0: the engine's own bound), so that a test of the gather does not
// depend on timing.
func SetGather(d time.Duration) { gatherFor = d }
