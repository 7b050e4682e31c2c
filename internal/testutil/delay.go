package testutil

import (
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// delayTimer waits until a given time with the precision of the kernel's
// timers without holding a thread: a timerfd read through the runtime's
// poller. time.Sleep cannot stand in for it: the poller's timeout has
// millisecond resolution, so a sleep of 250µs lasts a millisecond or more on
// an idle process; and a nanosleep(2) holds its P until sysmon takes it
// back, which stalls the other connections for up to 10ms. Waking a parked
// goroutine still costs tens of microseconds (more on a VM, whose idle CPU
// needs an interrupt), so the timer aims early by the lag its wake-ups have
// shown (see wakeLag). A delayTimer belongs to one goroutine.
type delayTimer struct {
	f   *os.File // nil: no timerfd here, time.Sleep instead
	lag *wakeLag
}

// wakeLag is how late the goroutines of the timers that share it run after
// the time they asked for, a moving average. A timer aims that much early,
// at most maxLead and half its wait, so that on average it returns at the
// time it was given rather than a wake-up later. Safe for concurrent use.
type wakeLag struct{ ns atomic.Int64 }

// maxLead bounds how early a timer aims, and each wake-up's weight in the
// average: about two quiet wake-ups on the development VM, so that a lag
// measured while the host was busy cannot make delays much shorter than
// asked once it is quiet again.
const maxLead = 150 * time.Microsecond

func (w *wakeLag) lead(wait time.Duration) time.Duration {
	return min(time.Duration(w.ns.Load()), wait/2, maxLead)
}

// observe folds one wake-up's lateness, up to maxLead, into the average
// (weight 1/16; a lost update between concurrent timers is harmless).
func (w *wakeLag) observe(late time.Duration) {
	old := w.ns.Load()
	w.ns.Store(old + (int64(min(late, maxLead))-old)/16)
}

// newDelayTimer returns a timer that learns from and feeds lag; Close
// releases its descriptor.
func newDelayTimer(lag *wakeLag) *delayTimer {
	const clockMonotonic, tfdNonblock, tfdCloexec = 1, syscall.O_NONBLOCK, syscall.O_CLOEXEC
	fd, _, errno := syscall.Syscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, tfdNonblock|tfdCloexec, 0)
	if errno != 0 {
		return &delayTimer{lag: lag}
	}
	return &delayTimer{f: os.NewFile(fd, "timerfd"), lag: lag} // non-blocking: read through the poller
}

// sleepUntil returns at about t, on average (at once when t has passed).
func (d *delayTimer) sleepUntil(t time.Time) {
	wait := time.Until(t)
	if wait <= 0 {
		return
	}
	aim := wait - d.lag.lead(wait)
	start := time.Now()
	d.sleep(aim)
	d.lag.observe(time.Since(start) - aim)
}

// sleep waits for d in the timerfd, or in time.Sleep without one.
func (d *delayTimer) sleep(wait time.Duration) {
	if d.f == nil {
		time.Sleep(wait)
		return
	}
	// struct itimerspec: it_interval (zero: one shot), then it_value
	// (relative, since flags are 0).
	spec := [2]syscall.Timespec{{}, syscall.NsecToTimespec(wait.Nanoseconds())}
	rc, err := d.f.SyscallConn()
	if err == nil {
		var errno syscall.Errno
		err = rc.Control(func(fd uintptr) {
			_, _, errno = syscall.Syscall6(syscall.SYS_TIMERFD_SETTIME, fd, 0, uintptr(unsafe.Pointer(&spec)), 0, 0, 0)
		})
		if err == nil && errno != 0 {
			err = errno
		}
	}
	if err != nil {
		time.Sleep(wait)
		return
	}
	var expirations [8]byte
	_, _ = d.f.Read(expirations[:]) // blocks in the poller until the timer fires
}

// Close releases the timer's descriptor.
func (d *delayTimer) Close() {
	if d.f != nil {
		_ = d.f.Close()
	}
}
