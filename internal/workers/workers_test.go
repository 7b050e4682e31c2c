package workers_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redfence/redfence/internal/workers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Every task runs, at most 16 workers stay parked between bursts, and Close
// makes them leave (goleak checks none is left at the end).
func TestEveryTaskRunsAndWorkersLeaveOnClose(t *testing.T) {
	p := workers.New()
	var ran atomic.Int64
	for range 3 {
		var wg sync.WaitGroup
		release := make(chan struct{})
		for range 40 {
			wg.Add(1)
			p.Go(func() {
				defer wg.Done()
				<-release // all 40 at once: 40 goroutines
				ran.Add(1)
			})
		}
		close(release)
		wg.Wait()
	}
	assert.Equal(t, int64(120), ran.Load())
	require.Eventually(t, func() bool { return p.Idle() == 16 }, 5*time.Second, time.Millisecond, "parked: %d", p.Idle())
	p.Close()
	assert.Zero(t, p.Idle(), "parked workers after Close")
}

// Close waits for a running task; a task given after Close runs before Go
// returns, so nothing outlives Close.
func TestCloseWaitsAndLaterTasksRunInline(t *testing.T) {
	p := workers.New()
	started, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	p.Go(func() {
		close(started)
		<-release
		finished.Store(true)
	})
	<-started
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	close(release)
	<-closed
	assert.True(t, finished.Load(), "Close returned before the running task ended")
	ran := false
	p.Go(func() { ran = true })
	assert.True(t, ran, "a task after Close ran inline")
	p.Close()
}
