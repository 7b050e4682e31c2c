package cli

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/pgdriver"
)

// pgRun is the command over Redis and PostgreSQL, as cmd/redfence has it.
func pgRun(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var out, errs bytes.Buffer
	code = Run(ctx, args, noEnv, nil, &out, &errs, Redis, Postgres)
	return code, out.String(), errs.String()
}

// --postgres shows what pgdriver Lockers hold: locks lists a live hold
// with its owner's host, inspect shows its token, release --force ends it
// (the holder's lock is lost) and inspect then shows the audit record;
// elections names an election's leader, its term and its host; inspect
// shows a semaphore's permits. A
// schema no Locker migrated is refused with a message naming the flag.
func TestPostgresStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	pool := testutil.Postgres(t)
	url := testutil.PostgresURL(t)
	d, err := pgdriver.New(pool, pgdriver.WithSchema("cli_pg"))
	require.NoError(t, err)
	require.NoError(t, d.Migrate(ctx))
	l, err := mutex.New(d, mutex.WithOwnerInfo(mutex.OwnerInfo{Host: "worker-7", PID: 4242}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	lk, err := l.Lock(ctx, "nightly", mutex.WithTTL(3*time.Second)) // renewed each second: the loss shows soon
	require.NoError(t, err)

	pg := []string{"--postgres", url, "--postgres-schema", "cli_pg"}
	code, out, errs := pgRun(ctx, append(pg, "locks")...)
	require.Zero(t, code, errs)
	assert.Contains(t, out, "nightly")
	assert.Contains(t, out, "worker-7")

	code, out, errs = pgRun(ctx, append(pg, "inspect", "nightly")...)
	require.Zero(t, code, errs)
	assert.Contains(t, out, fmt.Sprint(lk.Token()))
	assert.Regexp(t, `acquired +20\d\d-`, out, "when the token was issued")
	assert.Regexp(t, `renewed +20\d\d-`, out, "when the lease began")

	code, _, errs = pgRun(ctx, append(pg, "release", "nightly", "--force", "--reason", "stuck", "--by", "oncall", "--yes")...)
	require.Zero(t, code, errs)
	select {
	case <-lk.Context().Done():
	case <-ctx.Done():
		t.Fatal("the holder was never told it lost the lock")
	}
	assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrLockLost)
	code, out, errs = pgRun(ctx, append(pg, "inspect", "nightly")...)
	require.Zero(t, code, errs)
	assert.Contains(t, out, "oncall")
	assert.Contains(t, out, "stuck")

	e, err := election.New(l, "billing")
	require.NoError(t, err)
	term, err := e.Campaign(ctx, "host-billing")
	require.NoError(t, err)
	code, out, errs = pgRun(ctx, append(pg, "elections")...)
	require.Zero(t, code, errs)
	assert.Regexp(t, `billing +host-billing +`+fmt.Sprint(term.Token())+` .*worker-7`, out, "the leader, its term and its host")
	require.NoError(t, term.Release(ctx))

	sem, err := mutex.NewSemaphore(l, "exports", 2)
	require.NoError(t, err)
	p, err := sem.Acquire(ctx)
	require.NoError(t, err)
	code, out, errs = pgRun(ctx, append(pg, "inspect", "exports")...)
	require.Zero(t, code, errs)
	assert.Contains(t, out, "semaphore: limit 2, 1 permits held")
	assert.Contains(t, out, fmt.Sprint(p.Token()))
	require.NoError(t, p.Release(ctx))

	code, _, errs = pgRun(ctx, "--postgres", url, "--postgres-schema", "never_migrated", "locks")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "--postgres-schema")
	code, _, errs = pgRun(ctx, "--postgres-schema", "cli_pg", "locks")
	assert.Equal(t, 2, code, "a schema without a database")
	assert.Contains(t, errs, "--postgres")
}
