package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redfence/redfence/internal/redistest"
)

// cpuMeter measures the CPU time a benchmark spends, split between this
// process (the client: user and kernel time, Go runtime included) and the
// redis-servers (every thread's time on a CPU, from /proc/<pid>/task/*/
// schedstat, in nanoseconds). Wall time on a small VM mixes CPU with
// wake-up waits; CPU time says which side does the work, and on two cores
// shared by the client and five servers it is what bounds a Redlock cycle.
type cpuMeter struct {
	servers        []*redistest.RedisServer
	client, server time.Duration
}

func startCPU(b *testing.B, servers ...*redistest.RedisServer) *cpuMeter {
	m := &cpuMeter{servers: servers}
	m.client, m.server = m.read(b)
	return m
}

// report adds client-cpu-ns/op, server-cpu-ns/op and their sum, cpu-ns/op,
// over b.N operations since startCPU.
func (m *cpuMeter) report(b *testing.B) {
	client, server := m.read(b)
	n := float64(b.N)
	b.ReportMetric(float64(client-m.client)/n, "client-cpu-ns/op")
	b.ReportMetric(float64(server-m.server)/n, "server-cpu-ns/op")
	b.ReportMetric(float64(client-m.client+server-m.server)/n, "cpu-ns/op")
}

func (m *cpuMeter) read(b *testing.B) (client, server time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	client = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	for _, s := range m.servers {
		server += serverCPU(b, s.PID())
	}
	return client, server
}

// serverCPU is the time every thread of process pid has run, in the
// scheduler's own nanosecond accounting (the first field of schedstat).
func serverCPU(b *testing.B, pid int) time.Duration {
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "schedstat"))
	if err != nil || len(tasks) == 0 {
		b.Fatalf("server CPU of pid %d: no /proc/%d/task/*/schedstat (Linux with schedstat needed): %v", pid, pid, err)
	}
	var total time.Duration
	for _, t := range tasks {
		raw, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that just ended
		}
		f := strings.Fields(string(raw))
		if len(f) == 0 {
			b.Fatalf("server CPU: empty %s", t)
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			b.Fatalf("server CPU: %s: %v", t, err)
		}
		total += time.Duration(ns)
	}
	return total
}
