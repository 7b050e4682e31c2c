// Package fence holds what every redfence fence shares, whatever stores the
// tokens: the errors a guard returns (ErrStaleToken and *StaleTokenError,
// ErrInvalid, ErrNotMigrated, ErrCheckNotFirst), the limits on a
// resource and a token, and a multi-resource write's Claim with the one
// order every guard records claims in (Canonical).
//
// The guards re-export these (fenced.ErrStaleToken is fence.ErrStaleToken,
// fenced.StaleTokenError is fence.StaleTokenError, and so in sqlfence), so
// that errors.Is and errors.As find one identity across every store. It
// imports only the standard library: a program that fences a MySQL or
// SQLite table through sqlfence compiles no PostgreSQL driver for it.
package fence
