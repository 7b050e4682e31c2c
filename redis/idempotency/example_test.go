package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/idempotency"
	"github.com/redfence/redfence/redis/redisdriver"
)

// A payment service runs as two replicas over one Redis. A client's first
// attempt times out while the charge is still being made; it retries at
// once (on the other replica: the charge is in progress, 409) and again
// after a moment (the stored answer, replayed). One charge is made.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer rdb.Close()

	var charges atomic.Int32
	started, slowBank := make(chan struct{}), make(chan struct{})
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := charges.Add(1)
		close(started)
		<-slowBank // the bank takes its time
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"charge":"ch_%d"}`, n)
	})
	// The scope is the authenticated principal: keys of two customers
	// never meet. Here a header stands for what an auth middleware found.
	customer := func(r *http.Request) string { return r.Header.Get("X-Customer") }

	var replicas []*httptest.Server
	for range 2 {
		d, err := redisdriver.New(rdb)
		if err != nil {
			log.Fatal(err)
		}
		locker, err := mutex.New(d)
		if err != nil {
			log.Fatal(err)
		}
		defer locker.Close()                         // closes d; rdb stays ours
		mw, err := idempotency.New(locker, customer) // a bad option would be reported here
		if err != nil {
			log.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("POST /payments", mw(pay)) // the route is the pattern
		srv := httptest.NewServer(mux)
		defer srv.Close()
		replicas = append(replicas, srv)
	}

	send := func(ctx context.Context, srv *httptest.Server) (*http.Response, string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/payments", strings.NewReader(`{"amount":100}`))
		req.Header.Set("X-Customer", "cus_42")
		req.Header.Set("Idempotency-Key", `"5c1e4a7e-checkout-1"`)
		resp, err := srv.Client().Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp, string(body), err
	}

	ctx, timeout := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { _, _, err := send(ctx, replicas[0]); first <- err }()
	<-started
	timeout() // the client gives up on its first attempt
	fmt.Println("attempt 1:", errors.Is(<-first, context.Canceled))

	resp, _, err := send(context.Background(), replicas[1])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("retry while processing:", resp.Status, "Retry-After", resp.Header.Get("Retry-After"))

	close(slowBank)
	for {
		resp, body, err := send(context.Background(), replicas[1])
		if err != nil {
			log.Fatal(err)
		}
		if resp.StatusCode == http.StatusConflict {
			time.Sleep(10 * time.Millisecond) // a real client waits Retry-After
			continue
		}
		fmt.Println("retry after completion:", resp.Status, body, "replayed:", resp.Header.Get("Idempotent-Replayed"))
		break
	}
	fmt.Println("charges made:", charges.Load())
	// Output:
	// attempt 1: true
	// retry while processing: 409 Conflict Retry-After 1
	// retry after completion: 201 Created {"charge":"ch_1"} replayed: true
	// charges made: 1
}
