package chaoskit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rmw is one accepted read-modify-write: it read v inside the fenced
// transaction and wrote v+1.
type rmw struct{ read int64 }

// registerModel: the register's value; an rmw that read v is legal only in
// state v, and leaves v+1.
var registerModel = porcupine.Model{
	Init: func() any { return int64(0) },
	Step: func(state, input, output any) (bool, any) {
		s := state.(int64)
		op := output.(rmw)
		if op.read != s {
			return false, s
		}
		return true, s + 1
	},
	DescribeOperation: func(input, output any) string {
		return fmt.Sprintf("rmw %d -> %d", output.(rmw).read, output.(rmw).read+1)
	},
	DescribeState: func(state any) string { return fmt.Sprint(state) },
}

// Check judges the run, naming it name in its messages and artefacts: the
// register's history must be linearizable, the tokens the resource accepted
// strictly increasing, and the register must count exactly the accepted
// operations; a long run must also show its stalls (as overlaps or rejected
// writes). It logs the run's figures in one line.
func (w *World) Check(name string) {
	t := w.t
	t.Helper()
	if w.work != nil {
		w.checkLedger(name)
		return
	}
	if w.elect != nil {
		w.checkElection(name)
		return
	}
	if w.sem != nil {
		w.checkSemaphore(name)
		return
	}
	backwards, v := w.registerChecked(name)
	t.Logf("%s: %d operations, register %d, faults {%s}, stalls performed %d, overlaps %d, stale writes rejected %d, lock timeouts/errors %d, accepted tokens out of order %d",
		name, len(w.history), v, w.faultCounts(), w.stalled.Load(), w.overlaps.Load(), w.stale.Load(), w.lockErrs.Load(), backwards)
	if n := w.unknown.Load(); n > 0 {
		t.Logf("%s: %d writes of unknown outcome settled by the register, %d of them committed", name, n, w.unknownC.Load())
	}
	assert.Zero(t, backwards, "the resource accepted a token that was not larger")
	assert.Equal(t, int64(len(w.history)), v, "every accepted operation, and only those, changed the register")
	assert.NotEmpty(t, w.history, "no operation succeeded")
	// A stall shows as an overlap only when another client takes the lock
	// while it lasts, which a short run on a loaded machine may not see:
	// the bounded run of make test asserts safety only; make chaos (minutes
	// of stalls) also asserts that the stalls were exercised.
	w.stallsShowed()
}

// registerChecked checks the register's history for linearizability and
// returns how many tokens the resource accepted out of order and its value.
func (w *World) registerChecked(name string) (backwards int, v int64) {
	ctx := context.Background()
	w.linearizable(name, registerModel)
	tokens, err := w.reg.Accepted(ctx)
	require.NoError(w.t, err)
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			backwards++
		}
	}
	v, err = w.reg.Value(ctx)
	require.NoError(w.t, err)
	return backwards, v
}

// stallsShowed asserts, in a long run, that the stalls were exercised.
func (w *World) stallsShowed() {
	if w.cfg.Long > 0 && w.stalled.Load() > 0 {
		assert.Positive(w.t, w.overlaps.Load()+w.stale.Load(), "stalls past the lease must show up as overlaps or rejected writes")
	}
}

// linearizable checks the history with porcupine against model; when it
// is not, the history and porcupine's visualisation go to a temporary
// directory that the failure names.
func (w *World) linearizable(name string, model porcupine.Model) {
	t := w.t
	t.Helper()
	res, info := porcupine.CheckOperationsVerbose(model, w.history, max(time.Minute, w.cfg.Long/2))
	if res == porcupine.Ok {
		return
	}
	dir, err := os.MkdirTemp("", "redfence-chaos-")
	if err != nil {
		t.Errorf("%s: history not linearizable (%s), and no directory for it: %v", name, res, err)
		return
	}
	path := filepath.Join(dir, name+".html")
	_ = porcupine.VisualizePath(model, info, path)
	var b strings.Builder
	for _, op := range w.history {
		fmt.Fprintf(&b, "%d %d %d %v %v\n", op.ClientId, op.Call, op.Return, op.Input, op.Output)
	}
	_ = os.WriteFile(filepath.Join(dir, name+"-history.txt"), []byte(b.String()), 0o644)
	t.Errorf("%s: history not linearizable (%s); history and visualisation in %s", name, res, dir)
}

// faultCounts is "name: n, ..." of the faults injected, sorted.
func (w *World) faultCounts() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	kinds := make([]string, 0, len(w.counts))
	for k, n := range w.counts {
		kinds = append(kinds, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(kinds)
	return strings.Join(kinds, ", ")
}
