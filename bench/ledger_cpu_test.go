package bench

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ledgerCPU is the CPU time the ledger benchmark's three processes spend:
// this one (the workers: Lockers, pgx, Go runtime), the redis-server, and
// PostgreSQL (the pool's backends and the WAL writer, which flushes
// commits). On two shared cores their sum per transfer is what bounds the
// per-account side's throughput, whatever its locks allow.
type ledgerCPU struct {
	redisPID int
	pgPIDs   []int
}

// ledgerCPUSample is one reading of the three, cumulative.
// idle and all are the host's idle and total CPU time (/proc/stat), which
// say whether the side left the cores any time at all.
type ledgerCPUSample struct{ client, redis, pg, idle, all time.Duration }

func (c ledgerCPUSample) sub(o ledgerCPUSample) ledgerCPUSample {
	return ledgerCPUSample{c.client - o.client, c.redis - o.redis, c.pg - o.pg, c.idle - o.idle, c.all - o.all}
}

func (c ledgerCPUSample) add(o ledgerCPUSample) ledgerCPUSample {
	return ledgerCPUSample{c.client + o.client, c.redis + o.redis, c.pg + o.pg, c.idle + o.idle, c.all + o.all}
}

// newLedgerCPU opens every connection of pool (so that the backends the
// workers use exist and are listed) and finds the PostgreSQL processes to
// watch. PostgreSQL must run on this host, as testutil's does.
func newLedgerCPU(ctx context.Context, b *testing.B, pool *pgxpool.Pool, redisPID int) *ledgerCPU {
	conns := make([]*pgxpool.Conn, 0, pool.Config().MaxConns)
	for range pool.Config().MaxConns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	m := &ledgerCPU{redisPID: redisPID}
	rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity
		WHERE (datname = current_database() AND backend_type = 'client backend') OR backend_type = 'walwriter'`)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			b.Fatal(err)
		}
		m.pgPIDs = append(m.pgPIDs, pid)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return m
}

func (m *ledgerCPU) read(b *testing.B) ledgerCPUSample {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	s := ledgerCPUSample{client: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), redis: serverCPU(b, m.redisPID)}
	for _, pid := range m.pgPIDs {
		s.pg += serverCPU(b, pid)
	}
	s.idle, s.all = hostCPU(b)
	return s
}

// report adds client-, redis- and pg-cpu-us per transfer, and their sum
// cpu-us, over n transfers, the metrics' names prefixed by prefix.
func (c ledgerCPUSample) report(b *testing.B, n int, prefix string) {
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 / float64(n) }
	b.ReportMetric(per(c.client), prefix+"client-cpu-us")
	b.ReportMetric(per(c.redis), prefix+"redis-cpu-us")
	b.ReportMetric(per(c.pg), prefix+"pg-cpu-us")
	b.ReportMetric(per(c.client+c.redis+c.pg), prefix+"cpu-us")
	b.ReportMetric(100*float64(c.idle)/float64(c.all), prefix+"host-idle-%")
}

// hostCPU reads the host's idle (idle and iowait) and total CPU time from
// the first line of /proc/stat, in USER_HZ ticks counted as nanoseconds:
// only their ratio is used.
func hostCPU(b *testing.B) (idle, all time.Duration) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatalf("host CPU: %v", err)
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		b.Fatalf("host CPU: /proc/stat begins %q", line)
	}
	for i, v := range f[1:] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatalf("host CPU: /proc/stat: %v", err)
		}
		if i == 3 || i == 4 { // idle, iowait
			idle += time.Duration(n)
		}
		if i < 8 { // guest time is counted in user already
			all += time.Duration(n)
		}
	}
	return idle, all
}
