package chaoskit

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"

	"github.com/redfence/redfence/internal/leadercheck"
)

func op(id int, call, ret int64, out any) porcupine.Operation {
	return porcupine.Operation{ClientId: id, Call: call, Return: ret, Output: out}
}

// lossy is a lossy window from..to, its open and close.
func lossy(from, to int64) [2]porcupine.Operation {
	return [2]porcupine.Operation{op(Clients, from, from, semLossy{open: true}), op(Clients, to, to, semLossy{})}
}

// TestSemModel: the model refuses a grant beyond the limit and a token not
// above every earlier one, and allows what a correct semaphore does.
func TestSemModel(t *testing.T) {
	two := func(more ...porcupine.Operation) []porcupine.Operation {
		return append([]porcupine.Operation{op(0, 0, 1, semAcquired{10}), op(1, 0, 1, semAcquired{11})}, more...)
	}
	for _, c := range []struct {
		name  string
		h     []porcupine.Operation
		legal bool
	}{
		{"third while two held", two(op(2, 2, 3, semAcquired{12})), false},
		{"third after an end", two(op(0, 2, 3, semEnded{10}), op(2, 4, 5, semAcquired{12})), true},
		{"third concurrent with an end", two(op(0, 2, 5, semEnded{10}), op(2, 3, 4, semAcquired{12})), true},
		{"third after a lossy window", two(lossy(2, 3)[0], lossy(2, 3)[1], op(2, 4, 5, semAcquired{12}), op(0, 6, 7, semEnded{10})), true},
		{"third and fourth within a lossy window", two(lossy(2, 9)[0], op(2, 4, 5, semAcquired{12}), op(3, 4, 5, semAcquired{13}), lossy(2, 9)[1]), true},
		{"third after two ends, one held from the window", two(lossy(2, 3)[0], lossy(2, 3)[1], op(2, 4, 5, semAcquired{12}), op(3, 6, 7, semAcquired{13}), op(1, 8, 9, semEnded{11}), op(1, 10, 11, semAcquired{14})), false},
		{"token down", []porcupine.Operation{op(0, 0, 1, semAcquired{10}), op(0, 2, 3, semEnded{10}), op(1, 4, 5, semAcquired{9})}, false},
		{"token down within a lossy window", []porcupine.Operation{op(0, 0, 1, semAcquired{10}), lossy(2, 9)[0], op(1, 4, 5, semAcquired{9}), lossy(2, 9)[1]}, false},
		{"concurrent grants in token order", []porcupine.Operation{op(0, 0, 5, semAcquired{11}), op(1, 1, 4, semAcquired{10})}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.legal, porcupine.CheckOperations(semModel(2), c.h))
		})
	}
}

// TestBeyondLimit: a permit granted while Permits others are believed held
// past the drift margin is reported, unless one of those spans a reset.
func TestBeyondLimit(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	b := func(who string, tok int64, from, to int) leadercheck.Belief {
		return leadercheck.Belief{Who: who, Term: tok, Start: at(from), End: at(to)}
	}
	beliefs := []leadercheck.Belief{b("a", 1, 0, 100), b("b", 2, 10, 100), b("c", 3, 50, 60)}
	w := &World{start: t0}
	for _, x := range beliefs {
		w.record(0, x.Start.Add(-time.Millisecond), x.Start, semAcquired{x.Term})
	}
	over, excused := w.beyondLimit(beliefs, 5*time.Millisecond)
	assert.Len(t, over, 1)
	assert.Zero(t, excused)

	over, _ = w.beyondLimit(beliefs, 50*time.Millisecond) // within the margin
	assert.Empty(t, over)

	w.record(Clients, at(20), at(20), semLossy{open: true})
	w.record(Clients, at(30), at(30), semLossy{})
	over, excused = w.beyondLimit(beliefs, 5*time.Millisecond)
	assert.Empty(t, over)
	assert.Equal(t, 1, excused)
}
