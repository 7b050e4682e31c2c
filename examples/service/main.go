// Command service is a small service with every piece of redfence a team
// puts in one: a job that one replica runs as the elected leader, writing
// through a fence with its term; a POST that runs once however often it is
// retried; an endpoint that at most three requests run at once, across
// replicas; a debug page of the locks; and OpenTelemetry.
//
//	go run ./examples/service      # embedded Redis, a throwaway PostgreSQL
//
// One replica alone runs on embedded defaults. Two or more share a Redis
// and a PostgreSQL: REDIS_URL and DATABASE_URL name them, and -name, -addr
// and -admin-addr keep the replicas apart (README.md has the walk-through:
// a replica killed, one stalled past its lease).
//
//	http://127.0.0.1:8080  POST /orders      runs once per Idempotency-Key (orders.go)
//	                       GET  /export      at most 3 at once, across replicas (export.go)
//	                       GET  /checkpoint  what the leader's job wrote, and the fence (leader.go)
//	http://127.0.0.1:8081  /debug/locks/     the locks and the election of this replica
//
// Logs go to stderr; spans and metrics to stdout, as JSON lines (telemetry.go).
// service.go puts the pieces together; package examples/embedded only
// finds the service its servers.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// config is what a replica is told at start-up.
type config struct {
	name      string        // the replica's name: its campaign value, in logs and telemetry
	lease     time.Duration // the election's lease; the renew deadline and retry period follow
	interval  time.Duration // how often the leader writes its checkpoint
	exportFor time.Duration // how long one export streams
	queueFor  time.Duration // how long an export waits for one of the 3 permits
	redisURL  string        // "": embedded
	dbURL     string        // "": a throwaway local PostgreSQL
}

func main() {
	host, _ := os.Hostname()
	c := config{redisURL: os.Getenv("REDIS_URL"), dbURL: os.Getenv("DATABASE_URL")}
	addr := flag.String("addr", envOr("ADDR", "127.0.0.1:8080"), "the API's listen address (env ADDR)")
	adminAddr := flag.String("admin-addr", envOr("ADMIN_ADDR", "127.0.0.1:8081"), "the debug page's listen address, internal only (env ADMIN_ADDR)")
	flag.StringVar(&c.name, "name", envOr("REPLICA", fmt.Sprintf("%s-%d", host, os.Getpid())), "this replica's name (env REPLICA)")
	flag.DurationVar(&c.lease, "lease", 6*time.Second, "the leader's lease: how long a stalled or killed leader keeps the others waiting")
	flag.DurationVar(&c.interval, "interval", time.Second, "how often the leader writes its checkpoint")
	flag.DurationVar(&c.exportFor, "export-for", 5*time.Second, "how long one GET /export streams")
	flag.DurationVar(&c.queueFor, "queue-for", time.Second, "how long GET /export waits for a permit before answering 429")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("replica", c.name)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := listenAndRun(ctx, c, *addr, *adminAddr, log); err != nil {
		log.Error("service stopped", "err", err)
		os.Exit(1)
	}
}

// listenAndRun opens the two listeners and runs the service on them.
func listenAndRun(ctx context.Context, c config, addr, adminAddr string, log *slog.Logger) error {
	api, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	defer api.Close()
	admin, err := net.Listen("tcp", adminAddr)
	if err != nil {
		return err
	}
	defer admin.Close()
	return run(ctx, c, api, admin, os.Stdout, log)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
