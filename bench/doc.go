// Package bench compares redfence with the raw floor (and, as issue 10
// adds them, its peers) side by side, against private redis-servers started
// by internal/testutil. It is a module of its own so that peers never enter
// redfence's go.mod. Run with make bench.
package bench
