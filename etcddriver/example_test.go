package etcddriver_test

import (
	"context"
	"fmt"
	"os"

	etcddriver "github.com/redfence/redfence/etcddriver"
	"github.com/redfence/redfence/internal/etcdtest"
	"github.com/redfence/redfence/mutex"
)

// A Locker on etcd: the same Lock, token and loss context as on Redis. The
// example starts an embedded etcd on loopback, so it runs with nothing
// installed; a program gives its own *clientv3.Client.
func Example() {
	dir, _ := os.MkdirTemp("", "etcddriver-example")
	defer os.RemoveAll(dir)
	srv, err := etcdtest.StartIn(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Stop()
	cli, err := srv.NewClient()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cli.Close()

	d, err := etcddriver.New(cli, etcddriver.WithPrefix("locks/"))
	if err != nil {
		fmt.Println(err)
		return
	}
	locker, err := mutex.New(d) // the Locker owns d: its Close closes d
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	ctx := context.Background()
	err = locker.Do(ctx, "invoice-42", func(ctx context.Context, lk *mutex.Lock) error {
		// Pass lk.Token() to the resource's fence with every write.
		fmt.Println("held:", lk.Key(), lk.Token() > 0)
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// held: invoice-42 true
	// done: <nil>
}
