package leadercheck

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// EnvChild names the candidate a child process is; set in the children
// only, so a test function knows it runs as one.
const EnvChild = "REDFENCE_LEADERCHECK_CHILD"

// Report is one report of a child process, or (Gone) its end: its report
// pipe closed because it exited or was killed.
type Report struct {
	Who   string
	Event Event
	Gone  bool
	Err   error // a line that did not parse
}

// Group runs candidate processes: this test binary again, running one test
// function, each with its own report pipe (its fd 3) and stdin (the go of
// Ask). Every report of every process arrives on Reports. A Group is used
// from one goroutine.
type Group struct {
	test    string
	env     []string
	reports chan Report
	wg      sync.WaitGroup // one per process: its reader and Wait
	procs   []*Proc
}

// NewGroup runs the test function named test in each process, with env
// added to this process's environment.
func NewGroup(test string, env ...string) *Group {
	return &Group{test: test, env: env, reports: make(chan Report, 1024)}
}

// Reports is where the reports arrive; it is closed by Close.
func (g *Group) Reports() <-chan Report { return g.reports }

// Proc is one candidate process.
type Proc struct {
	Who   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   syncBuffer
	done  chan struct{} // closed when the process has exited and its reports were read
	err   error         // how it exited (cmd.Wait), once done is closed
}

// Spawn starts a candidate process named who, with env added to the
// group's. It dies with this process (Pdeathsig) should the test binary
// exit without Close.
func (g *Group) Spawn(who string, env ...string) (*Proc, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p := &Proc{Who: who, done: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], "-test.run=^"+g.test+"$", "-test.count=1", "-test.v")
	p.cmd.Env = append(append(append(os.Environ(), EnvChild+"="+who), g.env...), env...)
	p.cmd.ExtraFiles = []*os.File{w}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		_ = r.Close()
		_ = w.Close()
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		_ = r.Close()
		_ = w.Close()
		return nil, err
	}
	_ = w.Close() // the child's copy keeps the pipe open until it exits
	g.procs = append(g.procs, p)
	g.wg.Add(1)
	go g.read(p, r)
	return p, nil
}

// read forwards p's reports until its pipe closes, then reaps it.
func (g *Group) read(p *Proc, r *os.File) {
	defer g.wg.Done()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		e, err := Parse(sc.Text())
		g.reports <- Report{Who: p.Who, Event: e, Err: err}
	}
	_ = r.Close()
	p.err = p.cmd.Wait()
	close(p.done)
	g.reports <- Report{Who: p.Who, Gone: true}
}

// PID is the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Pause stops the process (SIGSTOP): its timers, renewals and reports with it.
// It returns once every thread of the process has stopped: kill(2) only
// queues the stop, and a thread running meanwhile could still act on a Go
// sent right after (a staged late write then ran before the newer term's).
func (p *Proc) Pause() error {
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	return waitStopped(p.cmd.Process.Pid, 10*time.Second)
}

// waitStopped polls /proc until every thread of pid is stopped (state T),
// or the process is gone (a kill races the pause: nothing left to act).
func waitStopped(pid int, limit time.Duration) error {
	end := time.Now().Add(limit)
	for {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(tasks) == 0 {
			return nil
		}
		if allStopped(tasks) {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("leadercheck: process %d not stopped %v after SIGSTOP", pid, limit)
		}
		runtime.Gosched()
	}
}

// allStopped: each stat file's state (the field after the command's
// closing parenthesis) is T, or the task is gone or a zombie.
func allStopped(stats []string) bool {
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread exited
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			continue
		}
		if st := b[i+2]; st != 'T' && st != 't' && st != 'Z' && st != 'X' {
			return false
		}
	}
	return true
}

// Resume continues a paused process (SIGCONT).
func (p *Proc) Resume() error { return p.cmd.Process.Signal(syscall.SIGCONT) }

// Kill ends the process (SIGKILL), paused or not; its Gone report follows.
func (p *Proc) Kill() error {
	err := p.cmd.Process.Signal(syscall.SIGKILL)
	if errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}

// Go lets the process's pending (or next) Ask return.
func (p *Proc) Go() error {
	_, err := io.WriteString(p.stdin, "go\n")
	return err
}

// Done is closed once the process exited and its reports were all sent.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Output is what the process wrote to stdout and stderr, and how it exited
// once it did.
func (p *Proc) Output() string {
	select {
	case <-p.done:
		return fmt.Sprintf("%s(exit: %v)", p.out.String(), p.err)
	default:
		return p.out.String()
	}
}

// Close kills every process, waits for them, and returns the reports not
// yet received; Reports is closed then.
func (g *Group) Close() []Report {
	for _, p := range g.procs {
		_ = p.Kill()
		_ = p.stdin.Close()
	}
	go func() { g.wg.Wait(); close(g.reports) }()
	var rest []Report
	for r := range g.reports {
		rest = append(rest, r)
	}
	return rest
}

// Child is a candidate process's side: reports go to the parent's pipe (fd
// 3), Ask waits for the parent's go on stdin. It is safe for concurrent use.
type Child struct {
	Who  string
	mu   sync.Mutex // guards w; not held while Ask waits, so reports go on
	w    *os.File
	inMu sync.Mutex // guards in
	in   *bufio.Reader
}

// OpenChild returns the Child of this process, or an error when it is not
// one that a Group started.
func OpenChild() (*Child, error) {
	who := os.Getenv(EnvChild)
	if who == "" {
		return nil, errors.New("leadercheck: not a child process (" + EnvChild + " unset)")
	}
	return &Child{Who: who, w: os.NewFile(3, "reports"), in: bufio.NewReader(os.Stdin)}, nil
}

// Report sends e to the parent.
func (c *Child) Report(e Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := fmt.Fprintln(c.w, e.String())
	return err
}

// Ask reports an ask and waits for the parent's go: the parent may pause
// the process before it lets it write.
func (c *Child) Ask(e Event) error {
	e.Kind = KindAsk
	if err := c.Report(e); err != nil {
		return err
	}
	c.inMu.Lock()
	defer c.inMu.Unlock()
	line, err := c.in.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "go\n" {
		return fmt.Errorf("leadercheck: parent said %q, not go", line)
	}
	return nil
}

// syncBuffer is a bytes.Buffer for a process's output, written by exec's
// copying goroutine and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
