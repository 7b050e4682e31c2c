// Package fence holds what every redfence fence shares, whatever stores the
// tokens: the errors a guard returns (ErrStaleToken and *StaleTokenError,
// ErrInvalid, ErrNotMigrated, ErrCheckNotFirst), the limits on a
// resource and a token, the checks every guard makes of its construction
// and its calls before any round trip (Required, Usable), and a
// multi-resource write's Claim with the one order every guard records
// claims in (Canonical).
//
// The guards re-export these (fenced.ErrStaleToken is fence.ErrStaleToken,
// fenced.StaleTokenError is fence.StaleTokenError, and so in sqlfence), so
// that errors.Is and errors.As find one identity across every store;
// ErrInvalid is redfence's one bad-input sentinel, mutex.ErrInvalid. It
// imports only the standard library and redfence's internal packages: a
// program that fences a MySQL or SQLite table through sqlfence compiles no
// PostgreSQL driver for it, and no Locker.
package fence
