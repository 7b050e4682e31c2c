package main

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/pgdriver"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// runDemo runs the demo against url ("" for the throwaway cluster) and
// checks what it printed against what it measured.
func runDemo(t *testing.T, url string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	o := options{dbURL: url, deposits: 8, ttl: 300 * time.Millisecond}
	res, err := run(ctx, &out, o)
	t.Log("\n" + out.String())
	require.NoError(t, err)
	assert.Equal(t, 2*o.deposits+1, res.committed, "every turn and the new holder's write commit")
	assert.EqualValues(t, res.committed, res.balance, "the balance is the committed deposits, the stalled one not among them")
	assert.True(t, res.tokensOrdered, "each deposit's token above the one before")
	assert.Greater(t, res.nextToken, res.stalledToken)
	assert.ErrorIs(t, res.stalledErr, pgdriver.ErrNotHeld)
	assert.Contains(t, out.String(), fmt.Sprintf("balance: %d, deposits committed: %d\n", res.balance, res.committed))
	assert.Contains(t, out.String(), "refused inside its own transaction")
	return res
}

// TestDemoOnAServer: DATABASE_URL's path, on the package's PostgreSQL.
func TestDemoOnAServer(t *testing.T) { runDemo(t, testutil.PostgresURL(t)) }

// TestDemoEmbedded: `go run ./examples/pglock` as written, on a throwaway
// cluster from the installed PostgreSQL binaries.
func TestDemoEmbedded(t *testing.T) { runDemo(t, "") }
