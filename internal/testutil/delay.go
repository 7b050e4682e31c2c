package testutil

import (
	"os"
	"syscall"
	"time"
	"unsafe"
)

// delayTimer waits until a given time with the precision of the kernel's
// timers (tens of microseconds) without holding a thread: a timerfd read
// through the runtime's poller. time.Sleep cannot stand in for it: the
// poller's timeout has millisecond resolution, so a sleep of 250µs lasts a
// millisecond or more on an idle process; and a nanosleep(2) holds its P
// until sysmon takes it back, which stalls the other connections for up to
// 10ms. A delayTimer belongs to one goroutine.
type delayTimer struct {
	f *os.File // nil: no timerfd here, time.Sleep instead
}

// newDelayTimer returns a timer; Close releases its descriptor.
func newDelayTimer() *delayTimer {
	const clockMonotonic, tfdNonblock, tfdCloexec = 1, syscall.O_NONBLOCK, syscall.O_CLOEXEC
	fd, _, errno := syscall.Syscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, tfdNonblock|tfdCloexec, 0)
	if errno != 0 {
		return &delayTimer{}
	}
	return &delayTimer{f: os.NewFile(fd, "timerfd")} // non-blocking: read through the poller
}

// sleepUntil returns at t (at once when t has passed).
func (d *delayTimer) sleepUntil(t time.Time) {
	wait := time.Until(t)
	if wait <= 0 {
		return
	}
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
