package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
)

// asReplica makes the test binary run main instead of the tests: the
// failover test starts replicas as processes of their own, so that it can
// stop one with SIGSTOP as an operator would.
const asReplica = "REDFENCE_SERVICE_AS_REPLICA"

func TestMain(m *testing.M) {
	if os.Getenv(asReplica) == "1" {
		main()
		return
	}
	redistest.Main(m)
}

// TestService runs one replica on the embedded defaults (miniredis, a
// throwaway PostgreSQL) on free loopback ports, and checks each piece
// through its API, its log and its telemetry.
func TestService(t *testing.T) {
	book := newLogbook(t)
	c := config{name: "solo", lease: 6 * time.Second, interval: 100 * time.Millisecond,
		exportFor: time.Minute, queueFor: 300 * time.Millisecond}
	r, stop := startInProcess(t, book, c)
	client := newClient(t)

	t.Run("the leader's checkpoint lands through the fence", func(t *testing.T) {
		lead, _ := book.await(t, 0, is("leading", "solo"))
		term := lead.int(t, "term")
		saved, _ := book.await(t, 0, is("checkpoint written", "solo"), termIs(term))
		cp := getCheckpoint(t, client, r.api)
		assert.Equal(t, term, cp.Term, "written by the term")
		assert.Equal(t, term, cp.Fence, "the fence recorded the term")
		assert.Equal(t, "solo", cp.Replica)
		assert.GreaterOrEqual(t, cp.Items, saved.int(t, "items"))
		assert.Positive(t, cp.Items)
	})

	t.Run("a retried POST is replayed", func(t *testing.T) {
		key := uuid(t)
		first := postOrder(t, client, r.api, key, `{"item":"book"}`)
		retry := postOrder(t, client, r.api, key, `{"item":"book"}`)
		other := postOrder(t, client, r.api, uuid(t), `{"item":"pen"}`)
		require.Equal(t, http.StatusCreated, first.status)
		assert.Empty(t, first.replayed)
		assert.Equal(t, http.StatusCreated, retry.status)
		assert.Equal(t, "true", retry.replayed)
		assert.Equal(t, first.body, retry.body, "the first answer, replayed")
		// The retry did not run the handler: the next order took the next id.
		assert.Equal(t, first.order.ID+1, other.order.ID)
		assert.Equal(t, "pen", other.order.Item)
	})

	t.Run("the fourth export waits, then is refused", func(t *testing.T) {
		var running []*export
		for range exportLimit {
			e := startExport(t, client, r.api)
			require.Equal(t, http.StatusOK, e.status)
			running = append(running, e)
		}
		began := time.Now()
		fourth := startExport(t, client, r.api)
		assert.Equal(t, http.StatusTooManyRequests, fourth.status)
		assert.Equal(t, "1", fourth.header.Get("Retry-After"))
		assert.GreaterOrEqual(t, time.Since(began), c.queueFor, "it waited for a permit first")

		// One leaves: its permit goes back, and the next export gets it.
		running[0].stop()
		book.await(t, 0, is("export ended", "solo"), func(rec record) bool { return rec["permit"] == running[0].permit })
		next := startExport(t, client, r.api)
		assert.Equal(t, http.StatusOK, next.status)
		assert.NotEqual(t, running[0].permit, next.permit, "a new permit, with a higher token")
		for _, e := range append(running[1:], next, fourth) {
			e.stop()
		}
	})

	t.Run("the debug page shows the term", func(t *testing.T) {
		lead, _ := book.await(t, 0, is("leading", "solo"))
		resp, err := client.Get(r.debug + "/debug/locks/?format=json")
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var page struct {
			Lockers []struct {
				Name string `json:"name"`
				Held []struct {
					Key   string `json:"key"`
					Token int64  `json:"token"`
				} `json:"held"`
				Campaigns []struct {
					Election string `json:"election"`
					Value    string `json:"value"`
					Term     int64  `json:"term"`
				} `json:"campaigns"`
			} `json:"lockers"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&page))
		require.Len(t, page.Lockers, 1)
		l := page.Lockers[0]
		assert.Equal(t, "solo", l.Name)
		require.Len(t, l.Campaigns, 1)
		assert.Equal(t, electionName, l.Campaigns[0].Election)
		assert.Equal(t, lead.int(t, "term"), l.Campaigns[0].Term)
		assert.Contains(t, l.Held, struct {
			Key   string `json:"key"`
			Token int64  `json:"token"`
		}{"election:" + electionName, lead.int(t, "term")})
	})

	require.NoError(t, stop())
	// Stopping, the leader resigned and saved once more under its term.
	ended, at := book.await(t, 0, is("term ended", "solo"))
	assert.Contains(t, ended["cause"], "election: Run stopped")
	book.await(t, at, is("checkpoint written", "solo"), termIs(ended.int(t, "term")))
	// Spans and metrics reached the exporters.
	for _, name := range []string{`"Name":"redfence.fenced.Do"`, `"Name":"redfence.idempotency"`,
		`"Name":"redfence.Semaphore.Acquire"`, `"Name":"redfence.election.terms"`, `"service.instance.id"`} {
		assert.Contains(t, r.telemetry.String(), name)
	}
}

// TestFailover runs two replicas as processes against one redis-server
// and one PostgreSQL, started together. The leader is stopped (SIGSTOP)
// past its lease: the other takes the lead and resumes from its
// checkpoint, and the stalled one's write, once it runs again, is refused
// by the fence. Then the new leader is stopped gracefully (SIGTERM): it
// saves, resigns, and the first takes the lead from that very count.
func TestFailover(t *testing.T) {
	_, srv := redistest.Redis(t)
	env := []string{"REDIS_URL=redis://" + srv.Addr(), "DATABASE_URL=" + testutil.PostgresURL(t)}
	book := newLogbook(t)
	replicas := map[string]*process{}
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b"} {
		p := startProcess(t, book, name, env, "-lease", "1s", "-interval", "300ms")
		replicas[name] = p
		wg.Go(func() { p.api = book.listening(t, name) })
	}
	wg.Wait() // both started, both migrated at once

	lead, _ := book.await(t, 0, is("leading", ""))
	first, term1 := replicas[lead["replica"]], lead.int(t, "term")
	second := replicas[map[string]string{"a": "b", "b": "a"}[first.name]]
	// Stopped between two writes, so that no transaction of its own
	// holds the fence row while it is stopped.
	_, at := book.await(t, 0, is("checkpoint written", first.name), termIs(term1))
	first.signal(t, syscall.SIGSTOP)

	took, _ := book.await(t, at, is("leading", second.name))
	term2 := took.int(t, "term")
	assert.Greater(t, term2, term1)
	assert.Equal(t, first.name, took["checkpoint_by"], "it resumes from the stalled leader's checkpoint")
	saved, at := book.await(t, at, is("checkpoint written", second.name), termIs(term2))

	first.signal(t, syscall.SIGCONT)
	refused, _ := book.await(t, at, is("checkpoint refused by the fence", first.name), termIs(term1))
	assert.Equal(t, term2, refused.int(t, "highest_term"))
	cp := getCheckpoint(t, newClient(t), first.api)
	assert.Equal(t, term2, cp.Term, "the stalled leader's write did not land")
	assert.Equal(t, second.name, cp.Replica)
	assert.Equal(t, second.name, cp.Leader)
	assert.GreaterOrEqual(t, cp.Items, saved.int(t, "items"), "no progress rolled back")

	second.signal(t, syscall.SIGTERM)
	_, at = book.await(t, at, is("term ended", second.name))
	last, at := book.await(t, at, is("checkpoint written", second.name), termIs(term2))
	again, _ := book.await(t, at, is("leading", first.name))
	assert.Greater(t, again.int(t, "term"), term2)
	assert.Equal(t, second.name, again["checkpoint_by"])
	assert.Equal(t, last["items"], again["items"], "it resumes from the resigned leader's last count")
	require.NoError(t, second.wait(), "a stopped replica exits 0")
	first.signal(t, syscall.SIGTERM)
	require.NoError(t, first.wait())
}

// replica is a service started by startInProcess.
type replica struct {
	api, debug string       // base URLs
	telemetry  bytes.Buffer // read once run returned
}

// startInProcess runs the service on free loopback ports; stop ends it and
// returns run's error.
func startInProcess(t *testing.T, book *logbook, c config) (*replica, func() error) {
	api, debug := listen(t), listen(t)
	r := &replica{api: "http://" + api.Addr().String(), debug: "http://" + debug.Addr().String()}
	log := slog.New(slog.NewTextHandler(book.writer(), nil)).With("replica", c.name)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, c, api, debug, &r.telemetry, log) }()
	stop := sync.OnceValue(func() error { cancel(); return <-done })
	t.Cleanup(func() { _ = stop() })
	return r, stop
}

func listen(t *testing.T) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

// process is a replica run by the test binary itself (asReplica).
type process struct {
	name   string
	api    string
	cmd    *exec.Cmd
	exited chan error
}

func startProcess(t *testing.T, book *logbook, name string, env []string, args ...string) *process {
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, append([]string{"-name", name, "-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(append(os.Environ(), asReplica+"=1"), env...)
	cmd.Stdout, cmd.Stderr = io.Discard, book.writer()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	p := &process{name: name, cmd: cmd, exited: make(chan error, 1)}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill() // a no-op once it exited
		<-p.exited
	})
	return p
}

func (p *process) signal(t *testing.T, sig os.Signal) {
	require.NoError(t, p.cmd.Process.Signal(sig), "%s: %v", p.name, sig)
}

// wait returns the process's exit error once it exited.
func (p *process) wait() error {
	err := <-p.exited
	p.exited <- err // for the cleanup
	return err
}

// logbook keeps the records slog's text handler writes (key=value pairs),
// from every replica of a test, for the test to wait on what the logs say.
type logbook struct {
	mu      sync.Mutex
	lines   []string
	recs    []record
	changed chan struct{} // closed and replaced at each record
}

type record map[string]string

func newLogbook(t *testing.T) *logbook {
	b := &logbook{changed: make(chan struct{})}
	t.Cleanup(func() {
		if t.Failed() {
			b.mu.Lock()
			defer b.mu.Unlock()
			t.Log("the replicas' log:\n" + strings.Join(b.lines, "\n"))
		}
	})
	return b
}

var pair = regexp.MustCompile(`([\w.]+)=("(?:[^"\\]|\\.)*"|\S*)`)

// writer returns a writer for one source of lines (a replica's stderr).
func (b *logbook) writer() io.Writer { return &lineWriter{add: b.add} }

// lineWriter hands each complete line written to add.
type lineWriter struct {
	mu      sync.Mutex
	partial []byte
	add     func(line string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.add(string(w.partial[:i]))
		w.partial = w.partial[i+1:]
	}
}

func (b *logbook) add(line string) {
	rec := record{}
	for _, m := range pair.FindAllStringSubmatch(line, -1) {
		v := m[2]
		if u, err := strconv.Unquote(v); err == nil {
			v = u
		}
		rec[m[1]] = v
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, line)
	b.recs = append(b.recs, rec)
	close(b.changed)
	b.changed = make(chan struct{})
}

// await returns the first record from the from-th on that every match
// accepts, and the index after it; it fails the test if none comes.
func (b *logbook) await(t *testing.T, from int, match ...func(record) bool) (record, int) {
	t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for i := from; ; {
		b.mu.Lock()
		recs, changed := b.recs, b.changed
		b.mu.Unlock()
	next:
		for ; i < len(recs); i++ {
			for _, m := range match {
				if !m(recs[i]) {
					continue next
				}
			}
			return recs[i], i + 1
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatal("no such record in the log")
		}
	}
}

// listening returns the API's URL that replica name logged.
func (b *logbook) listening(t *testing.T, name string) string {
	rec, _ := b.await(t, 0, is("listening", name), func(r record) bool { return r["server"] == "api" })
	return rec["addr"]
}

// is matches a message of a replica ("" for any).
func is(msg, replica string) func(record) bool {
	return func(r record) bool { return r["msg"] == msg && (replica == "" || r["replica"] == replica) }
}

func termIs(term int64) func(record) bool {
	return func(r record) bool { return r["term"] == strconv.FormatInt(term, 10) }
}

func (r record) int(t *testing.T, key string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(r[key], 10, 64)
	require.NoError(t, err, "%s in %v", key, r)
	return n
}

func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func getCheckpoint(t *testing.T, client *http.Client, api string) checkpointView {
	t.Helper()
	resp, err := client.Get(api + "/checkpoint")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var cp checkpointView
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&cp))
	return cp
}

type posted struct {
	status   int
	replayed string
	body     string
	order    order
}

func postOrder(t *testing.T, client *http.Client, api, key, body string) posted {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, api+"/orders", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("X-Tenant", "acme")
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	p := posted{status: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed"), body: string(b)}
	_ = json.Unmarshal(b, &p.order)
	return p
}

// export is a GET /export in flight: status and header are in once its
// first line was (the permit is held), or once it was refused.
type export struct {
	status int
	header http.Header
	permit string
	stop   func()
}

var permitLine = regexp.MustCompile(`^export by \S+, permit (\d+) of`)

func startExport(t *testing.T, client *http.Client, api string) *export {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/export", nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	e := &export{status: resp.StatusCode, header: resp.Header, stop: sync.OnceFunc(func() { cancel(); _ = resp.Body.Close() })}
	t.Cleanup(e.stop)
	if resp.StatusCode == http.StatusOK {
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		require.NoError(t, err)
		m := permitLine.FindStringSubmatch(line)
		require.NotNil(t, m, "first line %q", line)
		e.permit = m[1]
	}
	return e
}

func uuid(t *testing.T) string {
	var b [16]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
