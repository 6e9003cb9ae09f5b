//go:build !linux

package limits

import "time"

// BusyCPUs is how many CPUs other processes kept busy over d; this
// system does not tell, so 0 and 0.
func BusyCPUs(d time.Duration) (busy, allowed int) { return 0, 0 }
