package demo

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/redfence/redfence/internal/localpg"
)

// Postgres returns url (DATABASE_URL), or, when url is empty, the URL of a
// throwaway local cluster (localpg) that stop ends and removes. where says
// which, for the demo's header.
//
// A server named by url must accept a connection and answer a ping within a
// few seconds; if it does not, Postgres returns an error that names its
// address and the cause.
func Postgres(ctx context.Context, url string) (connString, where string, stop func(), err error) {
	if url != "" {
		cfg, err := pgx.ParseConfig(url)
		if err != nil {
			return "", "", nil, fmt.Errorf("DATABASE_URL: %w", err)
		}
		addr := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
		if err := check(ctx, func(ctx context.Context) error { return pingPostgres(ctx, cfg) }); err != nil {
			return "", "", nil, fmt.Errorf("cannot reach PostgreSQL at %s: %w (unset DATABASE_URL to use a throwaway local PostgreSQL)", addr, err)
		}
		return url, "DATABASE_URL (" + addr + ")", func() {}, nil
	}
	srv, err := localpg.Start(ctx)
	if err != nil {
		return "", "", nil, fmt.Errorf("no DATABASE_URL and no throwaway PostgreSQL: %w (%s)", err, localpg.Install)
	}
	return srv.URL(), "a throwaway local cluster (set DATABASE_URL to use yours)", srv.Stop, nil
}

func pingPostgres(ctx context.Context, cfg *pgx.ConnConfig) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(ctx) // closes the connection even once ctx is done
	return conn.Ping(ctx)
}
