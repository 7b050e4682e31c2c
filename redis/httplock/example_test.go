package httplock_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex"
	httplock "github.com/redfence/redfence/redis/httplock"
	"github.com/redfence/redfence/redis/redisdriver"
)

// Two replicas of a service share one Redis: the same request sent to each
// costs one origin call, and the second replica serves the first one's
// response.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer rdb.Close()

	var calls atomic.Int32
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1) // an expensive computation
		fmt.Fprintln(w, "report for", r.URL.Query().Get("month"))
	})

	// Each replica's Locker, over a driver on the shared Redis; closing a
	// Locker closes its driver, and rdb stays ours.
	newLocker := func() *mutex.Locker {
		d, err := redisdriver.New(rdb)
		if err != nil {
			log.Fatal(err)
		}
		l, err := mutex.New(d)
		if err != nil {
			log.Fatal(err)
		}
		return l
	}
	lockerA, lockerB := newLocker(), newLocker()
	defer lockerA.Close()
	defer lockerB.Close()
	mwA, err := httplock.New(lockerA) // a bad option would be reported here
	if err != nil {
		log.Fatal(err)
	}
	mwB, err := httplock.New(lockerB)
	if err != nil {
		log.Fatal(err)
	}
	replicaA := httptest.NewServer(mwA(origin))
	defer replicaA.Close()
	replicaB := httptest.NewServer(mwB(origin))
	defer replicaB.Close()

	for _, replica := range []*httptest.Server{replicaA, replicaB} {
		// Clients reach every replica under one name, as through a load
		// balancer: the Host is part of what makes two requests identical.
		req, err := http.NewRequest(http.MethodGet, replica.URL+"/report?month=2026-11", nil)
		if err != nil {
			log.Fatal(err)
		}
		req.Host = "reports.example"
		resp, err := replica.Client().Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(resp.StatusCode, " ", string(body))
	}
	fmt.Println("origin calls:", calls.Load())
	// Output:
	// 200 report for 2026-11
	// 200 report for 2026-11
	// origin calls: 1
}
