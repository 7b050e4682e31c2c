package chaoskit

import (
	"context"
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ledgerModel: Accounts registers, the balances. A transfer reads two of
// them and writes both: it is legal only in a state where they hold what
// it read, and moves its amount from one to the other.
var ledgerModel = porcupine.Model{
	Init: func() any {
		var s [Accounts]int64
		for a := range s {
			s[a] = InitialBalance
		}
		return s
	},
	Step: func(state, input, output any) (bool, any) {
		s := state.([Accounts]int64)
		in, read := input.(transferIn), output.([2]int64)
		if s[in.from] != read[0] || s[in.to] != read[1] {
			return false, s
		}
		s[in.from] -= in.amount
		s[in.to] += in.amount
		return true, s
	},
	DescribeOperation: func(input, output any) string {
		in, read := input.(transferIn), output.([2]int64)
		return fmt.Sprintf("%d from %d (read %d) to %d (read %d)", in.amount, in.from, read[0], in.to, read[1])
	},
	DescribeState: func(state any) string { return fmt.Sprint(state) },
}

// checkLedger is Check for the multi-key workload: the history linearizable
// over the accounts' registers, the tokens each account's resource accepted
// strictly increasing, and money conserved: the balances sum to what they
// started with, and each is its initial balance moved by exactly the
// accepted transfers, each of which left two accepted tokens.
func (w *World) checkLedger(name string) {
	t := w.t
	t.Helper()
	ctx := context.Background()
	w.linearizable(name, ledgerModel)

	tokens, err := w.work.ledger.Accepted(ctx)
	require.NoError(t, err)
	backwards, accepted := 0, 0
	for _, toks := range tokens {
		accepted += len(toks)
		for i := 1; i < len(toks); i++ {
			if toks[i] <= toks[i-1] {
				backwards++
			}
		}
	}
	got, err := w.work.ledger.Balances(ctx)
	require.NoError(t, err)
	want, sum := ledgerModel.Init().([Accounts]int64), int64(0)
	for _, op := range w.history {
		in := op.Input.(transferIn)
		want[in.from] -= in.amount
		want[in.to] += in.amount
	}
	for _, b := range got {
		sum += b
	}

	t.Logf("%s: %d transfers, balances %v, faults {%s}, stalls performed %d, overlaps %d, stale transfers rejected %d, lock timeouts/errors %d (latest return %v past its deadline), accepted tokens out of order %d",
		name, len(w.history), got, w.faultCounts(), w.stalled.Load(), w.overlaps.Load(), w.stale.Load(), w.lockErrs.Load(), time.Duration(w.work.late.Load()), backwards)
	assert.Zero(t, backwards, "an account's resource accepted a token that was not larger")
	assert.Equal(t, int64(Accounts*InitialBalance), sum, "money was created or destroyed")
	assert.Equal(t, want, got, "the balances are not the initial ones moved by exactly the accepted transfers")
	assert.Equal(t, 2*len(w.history), accepted, "every accepted transfer, and only those, recorded a token on each of its accounts")
	assert.NotEmpty(t, w.history, "no transfer succeeded")
	w.stallsShowed()
}
