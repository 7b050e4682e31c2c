package fenced_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/testutil"
)

// role creates a role (roles are cluster-wide: the name is unique to this
// run and test) with attrs (LOGIN, ...) and drops it, and what it owns in
// the package database, when the test ends.
func role(t *testing.T, pool *pgxpool.Pool, name, attrs string) string {
	t.Helper()
	r := fmt.Sprintf("rf_%s_%d_%d", name, os.Getpid(), tableSeq.Add(1))
	_, err := pool.Exec(context.Background(), `CREATE ROLE `+r+` `+attrs)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), `DROP OWNED BY `+r+` CASCADE; DROP ROLE `+r)
		assert.NoError(t, err)
	})
	return r
}

// connectAs opens a connection that logs in as role (the test server
// trusts loopback), so that session_user is role.
func connectAs(t *testing.T, role string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(testutil.PostgresURL(t))
	require.NoError(t, err)
	cfg.User = role
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// poolWithPath is a pool of the package database whose sessions have
// search_path path, as a tenant's service would.
func poolWithPath(t *testing.T, path string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testutil.PostgresURL(t))
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["search_path"] = path
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}
