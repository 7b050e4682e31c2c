package main

import "github.com/redfence/redfence/internal/cli"

// The command is internal/cli over Redis alone: the etcd module's
// cmd/redfence adds --etcd, so that this build never compiles grpc or etcd.
func main() { cli.Main(cli.Redis, cli.Postgres) }
