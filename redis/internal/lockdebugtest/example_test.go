package lockdebugtest

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/lockdebug"
	"github.com/redfence/redfence/redis/redisdriver"
)

// Mount the page on the admin mux, beside net/http/pprof: it shows lock
// keys and owner hosts, so never on the public one.
func Example_handler() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	drv, err := redisdriver.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	locker, err := mutex.New(drv, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "billing"}))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	mux := http.NewServeMux() // the admin mux, beside net/http/pprof
	mux.Handle("/debug/locks/", lockdebug.Handler(locker))
	// go http.ListenAndServe("127.0.0.1:6060", mux) // an internal address

	lk, err := locker.Lock(ctx, "invoice:42")
	if err != nil {
		log.Fatal(err)
	}
	defer lk.Release(ctx)

	// What a browser would see at /debug/locks/, here in its JSON form.
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/locks/?format=json", nil))
	var page struct {
		Lockers []struct {
			Held []struct {
				Key   string `json:"key"`
				Count int    `json:"count"`
			} `json:"held"`
		} `json:"lockers"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	for _, h := range page.Lockers[0].Held {
		fmt.Println(h.Key, "count", h.Count)
	}
	// Output:
	// 200 application/json
	// invoice:42 count 1
}
