package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/examples/embedded"
	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/lockdebug"
	"github.com/redfence/redfence/redis/idempotency"
	"github.com/redfence/redfence/redis/redisdriver"
)

// schema holds the service's tables and its fence table. Every replica
// creates what is missing and drops nothing: the others may be running.
const schema = "redfence_service_demo"

// service is one replica: what its handlers and its leader's job share.
type service struct {
	cfg      config
	log      *slog.Logger
	pool     *pgxpool.Pool
	locker   *mutex.Locker                   // the replica's one Locker; the debug page shows it
	guard    *fenced.Guard                   // the fence of the leader's writes
	election *election.Election              // who runs the job
	exports  *mutex.Semaphore                // exportLimit exports at once, across replicas
	once     func(http.Handler) http.Handler // a POST runs once per Idempotency-Key
}

// run serves api and admin until ctx ends, and runs the leader's job while
// this replica leads; telemetry receives the spans and metrics. It returns
// once everything it started has stopped.
func run(ctx context.Context, c config, api, admin net.Listener, telemetry io.Writer, log *slog.Logger) error {
	if err := c.check(); err != nil {
		return err
	}
	tp, mp, err := newTelemetry(telemetry, c.name)
	if err != nil {
		return err
	}
	defer shutdownTelemetry(tp, mp, log) // last: it flushes what the rest recorded on the way out

	// Redis first: its check takes milliseconds, a throwaway PostgreSQL seconds.
	newClient, redisWhere, stopRedis, err := embedded.Redis(ctx, c.redisURL)
	if err != nil {
		return err
	}
	defer stopRedis()
	rdb := newClient() // one client per process, shared by everything below
	defer rdb.Close()
	dbURL, dbWhere, stopDB, err := embedded.Postgres(ctx, c.dbURL, "service")
	if err != nil {
		return err
	}
	defer stopDB()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	log.Info("starting", "pid", os.Getpid(), "redis", redisWhere, "postgres", dbWhere)

	s := &service{cfg: c, log: log, pool: pool}
	if err := s.build(ctx, rdb, tp, mp); err != nil {
		return err
	}
	defer s.locker.Close() // releases what is still held, once the servers and the job stopped
	return serve(ctx, log, s.campaign, server{"api", api, s.api()}, server{"debug", admin, s.debug()})
}

// build makes the replica's pieces: the fence (migrated), the Locker over
// rdb, and over it the election, the semaphore and the idempotency
// middleware, each given the telemetry providers. On success the caller
// closes s.locker.
func (s *service) build(ctx context.Context, rdb redis.UniversalClient, tp trace.TracerProvider, mp metric.MeterProvider) error {
	if err := s.migrate(ctx, fenced.WithTracerProvider(tp), fenced.WithMeterProvider(mp)); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	locker, err := newLocker(rdb, s.cfg.name, mutex.WithTracerProvider(tp), mutex.WithMeterProvider(mp))
	if err != nil {
		return err
	}
	lease := s.cfg.lease
	s.election, err = election.New(locker, electionName,
		// client-go's proportions of lease, renew deadline and retry period.
		election.WithTTL(lease), election.WithRenewDeadline(lease*2/3), election.WithRetryPeriod(lease/6),
		election.WithTracerProvider(tp), election.WithMeterProvider(mp))
	if err == nil {
		s.exports, err = mutex.NewSemaphore(locker, "service:export", exportLimit)
	}
	if err == nil {
		s.once, err = idempotency.New(locker, tenant,
			// A 5xx (the database down) is not kept: a retry runs again.
			idempotency.WithStoreStatus(func(status int) bool { return status < 500 }),
			idempotency.WithTracerProvider(tp), idempotency.WithMeterProvider(mp))
	}
	if err != nil {
		_ = locker.Close()
		return err
	}
	s.locker = locker
	return nil
}

// api is the service's public mux.
func (s *service) api() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /orders", s.once(http.HandlerFunc(s.createOrder)))
	mux.HandleFunc("GET /export", s.export)
	mux.HandleFunc("GET /checkpoint", s.checkpoint)
	return mux
}

// debug is the internal mux: the debug page shows lock keys and the hosts
// of their owners, so it is never on the public listener (as for
// net/http/pprof).
func (s *service) debug() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/debug/locks/", lockdebug.NamedHandler(lockdebug.Named{
		Name: s.cfg.name, Locker: s.locker, Elections: []*election.Election{s.election}}))
	return mux
}

// server is a listener and what it serves.
type server struct {
	name string
	ln   net.Listener
	h    http.Handler
}

// serve runs job and the servers until ctx ends or one of them fails, then
// stops them all: the servers get a few seconds for the requests in flight,
// whose contexts end at once (an export stops streaming).
func serve(ctx context.Context, log *slog.Logger, job func(context.Context) error, servers ...server) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return job(ctx) })
	for _, sv := range servers {
		srv := &http.Server{Handler: sv.h, ReadHeaderTimeout: 5 * time.Second,
			BaseContext: func(net.Listener) context.Context { return ctx }}
		g.Go(func() error {
			if err := srv.Serve(sv.ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
		g.Go(func() error {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil {
				return srv.Close()
			}
			return nil
		})
		log.Info("listening", "server", sv.name, "addr", "http://"+sv.ln.Addr().String())
	}
	return g.Wait()
}

// migrate creates what is missing: the service's tables, then the fence
// table. Replicas starting together run it at once: the advisory lock makes
// them take turns, because two concurrent CREATE ... IF NOT EXISTS of one
// name can both miss it and one fail on the catalog's unique index.
// Guard.Migrate takes such a lock of its own.
func (s *service) migrate(ctx context.Context, opts ...fenced.Option) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, q := range []string{
			`SELECT pg_advisory_xact_lock(hashtext('` + schema + `'))`,
			`CREATE SCHEMA IF NOT EXISTS ` + schema,
			`CREATE TABLE IF NOT EXISTS ` + schema + `.checkpoint (
				job text PRIMARY KEY, items bigint NOT NULL, term bigint NOT NULL,
				replica text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())`,
			`INSERT INTO ` + schema + `.checkpoint (job, items, term, replica) VALUES ('` + jobName + `', 0, 0, '') ON CONFLICT DO NOTHING`,
			`CREATE TABLE IF NOT EXISTS ` + schema + `.orders (
				id bigserial PRIMARY KEY, tenant text NOT NULL, item text NOT NULL,
				replica text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`,
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.guard, err = fenced.New(s.pool, append(opts, fenced.WithTable(schema+".fences"))...)
	if err != nil {
		return err
	}
	return s.guard.Migrate(ctx) // safe from every replica at once
}

// newLocker is the replica's one Locker, over its Redis client, which stays
// the caller's to close. Inspection (the debug page, `redfence locks`) shows
// the replica's name beside its host and pid.
func newLocker(rdb redis.UniversalClient, name string, opts ...mutex.Option) (*mutex.Locker, error) {
	drv, err := redisdriver.New(rdb)
	if err != nil {
		return nil, err
	}
	opts = append(opts, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "redfence-service", Label: name}))
	l, err := mutex.New(drv, opts...)
	if err != nil {
		_ = drv.Close()
		return nil, err
	}
	return l, nil
}

func (c config) check() error {
	switch {
	case c.name == "":
		return errors.New("a replica needs a name (-name)")
	case c.interval <= 0 || c.exportFor <= 0 || c.queueFor <= 0:
		return errors.New("-interval, -export-for and -queue-for must be positive")
	}
	return nil // the election checks -lease
}
