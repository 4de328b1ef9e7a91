//go:build unix

package bench_test

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the CPU time this process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// timeCPU resets b's timer and returns the function that reports the
// process's CPU time per operation since then as cpu-ns/op; use it as
// `defer timeCPU(b)()` where b.ResetTimer would be. Unlike ns/op it leaves
// out the time the benchmark waited — for an fsync, or for a CPU another
// process held — so on a shared machine it tells two builds' work apart
// where ns/op swings. It counts every goroutine of the process, the
// garbage collector's included.
func timeCPU(b *testing.B) func() {
	b.Helper()
	b.ResetTimer()
	start := cpuTime(b)
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
		}
	}
}
