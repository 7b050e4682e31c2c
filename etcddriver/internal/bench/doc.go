// Package bench compares the etcd driver (a mutex.Locker over etcddriver)
// with etcd's own clientv3/concurrency.Mutex on one embedded etcd member, in
// one run: the uncontended Lock+Release cycle in alternating 16-cycle blocks
// (EtcdPaired, as bench's Paired does for Redis), and 32 goroutines taking
// one key (EtcdContended). Round trips are counted by a gRPC client
// interceptor on each subject's client.
//
// It lives in the etcd module so that the Redis benchmarks' module never
// compiles etcd. make bench-etcd runs it in rounds and prints the report
// with bench/report; bench/README.md has the numbers.
package bench
