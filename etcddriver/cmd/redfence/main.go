// Command redfence is the redfence command (github.com/redfence/redfence/cmd/redfence,
// whose documentation says it all) with etcd added: besides --redis, it
// takes --etcd URL to see and operate the locks that etcddriver Drivers hold.
//
//	cd etcddriver && go install ./cmd/redfence    # from a clone
//	redfence --etcd http://127.0.0.1:2379 locks
//	redfence --etcd http://127.0.0.1:2379 inspect invoice-42
//	redfence --etcd http://127.0.0.1:2379 release --token 12 --force --reason "stuck" -- invoice-42
//
// It lives in the etcddriver module so that the Redis build of the command never
// compiles grpc or etcd; the commands themselves are the same code
// (internal/cli), over the Locker this store builds.
//
// --etcd names a member of one cluster; repeat it, or separate URLs with
// commas, for more (default $ETCD_ENDPOINTS). URLs are http:// or https://
// (TLS with the system's roots). --etcd-token-base is the
// etcddriver.WithTokenBase of the Lockers looked at: tokens are shown, and
// release --token N is matched, with it. Before a command, every member
// named is asked for its status: one that cannot be reached is a warning
// while another answers; a learner, or a cluster without a leader (fewer
// than a majority of its members up), is refused, since no lock could be
// read or released through it.
package main

import (
	"io"

	"google.golang.org/grpc/grpclog"

	"github.com/redfence/redfence/internal/cli"
)

func main() {
	// grpc logs failed connections on stderr; the error that ends the
	// command says it once, in words.
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, io.Discard))
	cli.Main(cli.Redis, Etcd)
}
