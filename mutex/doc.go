// Package mutex will be redfence's Redis lock: owner tokens, atomic release,
// auto-renewal with a lease deadline, reentrancy, fencing tokens and Redlock.
//
// Not implemented yet (issue 3). Nothing here works.
package mutex
