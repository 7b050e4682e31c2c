// Package httplock will be cluster-wide stampede protection for net/http:
// identical concurrent requests across all replicas cause one origin call.
//
// Not implemented yet (issue 6). Nothing here works.
package httplock
