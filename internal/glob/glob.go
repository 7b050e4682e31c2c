// Package glob is Redis's glob matching and quoting, shared by the Locker
// (which filters a listing's keys) and the Redis inspection (which scans
// with MATCH).
package glob

import "strings"

// Escape quotes s for a Redis MATCH pattern.
func Escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Match is Redis's glob matching (stringmatchlen): * any run, ? any
// byte, [abc], [^a], [a-z], and \ to quote the next byte. It backtracks
// only to the last *, so its cost is at most len(p)·len(s), whatever the
// pattern (the debug page takes one from a request).
func Match(p, s string) bool {
	pi, si := 0, 0
	star, mark := -1, 0 // the last * seen, and where s stood after it
	for si < len(s) {
		if pi < len(p) {
			if p[pi] == '*' {
				star, mark = pi, si
				pi++
				continue
			}
			if n, ok := matchOne(p[pi:], s[si]); ok {
				pi += n
				si++
				continue
			}
		}
		if star < 0 {
			return false
		}
		mark++
		pi, si = star+1, mark
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// matchOne matches the byte c against the pattern item at the start of p
// (not a *), and says how long the item is.
func matchOne(p string, c byte) (n int, ok bool) {
	switch p[0] {
	case '?':
		return 1, true
	case '\\':
		if len(p) >= 2 {
			return 2, p[1] == c
		}
		return 1, c == '\\'
	case '[':
		i := 1
		not := i < len(p) && p[i] == '^'
		if not {
			i++
		}
		hit := false
		for i < len(p) && p[i] != ']' {
			switch {
			case p[i] == '\\' && i+1 < len(p):
				i++
				hit = hit || p[i] == c
			case i+2 < len(p) && p[i+1] == '-':
				lo, hi := p[i], p[i+2]
				if lo > hi {
					lo, hi = hi, lo
				}
				hit = hit || (c >= lo && c <= hi)
				i += 2
			default:
				hit = hit || p[i] == c
			}
			i++
		}
		if i >= len(p) {
			return len(p), false // unclosed [: Redis matches it to the end; we refuse
		}
		return i + 1, hit != not
	}
	return 1, p[0] == c
}
