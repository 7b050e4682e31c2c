// Package runner will run each tick of a periodic job on exactly one replica.
//
// Not implemented yet (issue 8). Nothing here works.
package runner
