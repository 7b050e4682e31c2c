package leadercheck_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/leadercheck"
)

// TestEchoChild is the child of TestGroup: it starts term 1, then asks and
// writes until its stdin closes, while another goroutine renews.
func TestEchoChild(t *testing.T) {
	c, err := leadercheck.OpenChild()
	if err != nil {
		return // not a child: nothing to do
	}
	require.NoError(t, c.Report(leadercheck.Event{Kind: leadercheck.KindStart, Term: 1, At: time.Now(), Deadline: time.Now().Add(time.Second)}))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_ = c.Report(leadercheck.Event{Kind: leadercheck.KindLease, Term: 1, Deadline: time.Now().Add(time.Second)})
			}
		}
	}()
	defer func() { close(stop); <-done }()
	for {
		now := time.Now()
		if c.Ask(leadercheck.Event{Term: 1, At: now}) != nil {
			return // the parent closed stdin
		}
		require.NoError(t, c.Report(leadercheck.Event{Kind: leadercheck.KindWrite, Term: 1, At: now, Accepted: true}))
	}
}

// next returns the next report of who of kind k ("": its Gone), skipping
// others.
func next(t *testing.T, g *leadercheck.Group, who string, k leadercheck.Kind) leadercheck.Report {
	t.Helper()
	timeout := time.NewTimer(30 * time.Second) // a bound on a hang, not a synchronisation
	defer timeout.Stop()
	for {
		select {
		case r := <-g.Reports():
			require.NoError(t, r.Err)
			if r.Who == who && (r.Gone && k == "" || !r.Gone && r.Event.Kind == k) {
				return r
			}
		case <-timeout.C:
			t.Fatalf("no %q report", k)
		}
	}
}

// state is the process state letter of pid (R, S, T for stopped, ...).
func state(t *testing.T, pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	require.NoError(t, err)
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return f[0]
}

// TestGroup: a child's reports arrive; Pause stops it (the kernel says so)
// and a go sent while it is paused lets its Ask return only once resumed;
// Kill ends it with a Gone report; Close reaps the rest.
func TestGroup(t *testing.T) {
	g := leadercheck.NewGroup("TestEchoChild")
	a, err := g.Spawn("a")
	require.NoError(t, err)
	b, err := g.Spawn("b")
	require.NoError(t, err)

	start := next(t, g, "a", leadercheck.KindStart)
	assert.Equal(t, int64(1), start.Event.Term)
	next(t, g, "a", leadercheck.KindAsk)
	require.NoError(t, a.Pause())
	require.Eventually(t, func() bool { return state(t, a.PID()) == "T" }, 10*time.Second, time.Millisecond, "SIGSTOP stops the process")
	require.NoError(t, a.Go())
	require.NoError(t, b.Go())
	require.NoError(t, a.Resume())
	require.Eventually(t, func() bool { return state(t, a.PID()) != "T" }, 10*time.Second, time.Millisecond, "SIGCONT continues it")
	w := next(t, g, "a", leadercheck.KindWrite)
	assert.True(t, w.Event.Accepted)

	require.NoError(t, a.Pause())
	require.NoError(t, a.Kill(), "a paused process can be killed")
	next(t, g, "a", "")
	<-a.Done()
	assert.Contains(t, a.Output(), "=== RUN   TestEchoChild")
	assert.Contains(t, a.Output(), "(exit: signal: killed)")
	assert.NoError(t, a.Kill(), "killing it again is harmless")

	rest := g.Close()
	require.NotEmpty(t, rest)
	assert.True(t, rest[len(rest)-1].Gone)
	assert.Equal(t, "b", rest[len(rest)-1].Who)
	<-b.Done()
}

func TestOpenChildOutsideAGroup(t *testing.T) {
	if os.Getenv(leadercheck.EnvChild) != "" {
		return
	}
	_, err := leadercheck.OpenChild()
	assert.Error(t, err)
}
