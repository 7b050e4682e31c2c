package testutil

import (
	"sync/atomic"
	"testing"
	"time"
)

// Lateness measures how late this process's timers fire while a timed
// operation runs, so that a test's time bound grows with the machine's load
// instead of failing under it. A test starts it before the operation, and
// bounds the operation by Bound(d): d plus a multiple of the worst lateness
// seen. Timers late by that much mean the operation's own timers and
// goroutines were held up as long.
type Lateness struct {
	worst atomic.Int64
	stop  chan struct{}
	done  chan struct{}
}

// tick is the lateness probe's period.
const tick = 2 * time.Millisecond

// MeasureLateness starts measuring; it stops at Stop or when the test ends.
func MeasureLateness(t testing.TB) *Lateness {
	l := &Lateness{stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	t.Cleanup(l.Stop)
	return l
}

func (l *Lateness) run() {
	defer close(l.done)
	timer := time.NewTimer(tick)
	defer timer.Stop()
	due := time.Now().Add(tick)
	for {
		select {
		case <-l.stop:
			return
		case now := <-timer.C:
			if late := time.Since(due); late > time.Duration(l.worst.Load()) {
				l.worst.Store(int64(late))
			}
			due = now.Add(tick)
			timer.Reset(tick)
		}
	}
}

// Stop ends the measurement; it may be called more than once.
func (l *Lateness) Stop() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// Worst is the largest lateness seen so far.
func (l *Lateness) Worst() time.Duration { return time.Duration(l.worst.Load()) }

// Bound is d widened by the load measured: d + 4 × the worst lateness. On
// a quiet machine it is d.
func (l *Lateness) Bound(d time.Duration) time.Duration { return d + 4*l.Worst() }
