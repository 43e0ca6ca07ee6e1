//go:build !unix

package nodeview

// cpuTime is unavailable off Unix.
func cpuTime() int64 { return -1 }
