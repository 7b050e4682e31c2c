package main

import (
	"io"

	"google.golang.org/grpc/grpclog"

	"github.com/redfence/redfence/cmd/internal/cli"
	"github.com/redfence/redfence/cmd/internal/etcdstore"
)

func main() {
	// grpc logs failed connections on stderr; the error that ends the
	// command says it once, in words.
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, io.Discard))
	cli.Main(cli.Redis, cli.Postgres, etcdstore.Etcd)
}
