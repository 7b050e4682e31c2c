package fence

import (
	"strings"
	"unicode/utf8"

	"github.com/redfence/redfence/internal/invalid"
)

// MaxResourceLen is the longest resource, in bytes, that a guard accepts.
// It keeps every store's primary-key entry within its limit: PostgreSQL's
// B-tree row limit (about 2.7 KB), InnoDB's 3072-byte index key (the MySQL
// fence table's key is a VARBINARY(1024)).
const MaxResourceLen = 1024

// ValidateResource returns nil for a resource a guard accepts: 1 to
// MaxResourceLen bytes of valid UTF-8 without a NUL byte. Otherwise it
// returns an error matching ErrInvalid that says what is wrong, quoting the
// resource's length, never the resource.
func ValidateResource(resource string) error {
	if resource == "" {
		return invalidf("empty resource")
	}
	return validText("resource", resource)
}

// ValidatePrefix is ValidateResource for a prefix of resources, which may
// be empty.
func ValidatePrefix(prefix string) error { return validText("prefix", prefix) }

// ValidateToken returns nil for a token a guard accepts, 0 to
// math.MaxInt64, and otherwise an error matching ErrInvalid.
func ValidateToken(token int64) error {
	if token < 0 {
		return invalidf("negative token %d", token)
	}
	return nil
}

// SplitTable validates a fence table's name, "name" or "schema.name", and
// returns its parts, unquoted, for the store's own identifier quoting: a
// part may not be empty, longer than 63 bytes (PostgreSQL's and MySQL's
// limit on identifiers), contain a NUL, or be invalid UTF-8; otherwise the
// error matches ErrInvalid.
func SplitTable(name string) ([]string, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return nil, invalidf("table name %q has more than schema.name", Clip(name))
	}
	for _, p := range parts {
		switch {
		case p == "":
			return nil, invalidf("table name %q has an empty part", Clip(name))
		case len(p) > 63:
			return nil, invalidf("table name part %q is %d bytes, longer than 63", Clip(p), len(p))
		case strings.ContainsRune(p, 0):
			return nil, invalidf("table name %q contains NUL", Clip(name))
		case !utf8.ValidString(p):
			return nil, invalidf("table name %q is not valid UTF-8", Clip(name))
		}
	}
	return parts, nil
}

// validText applies a resource's limits, other than being empty, to s,
// which name says what it is.
func validText(name, s string) error {
	switch {
	case len(s) > MaxResourceLen:
		return invalidf("%s is %d bytes, over the limit of %d", name, len(s), MaxResourceLen)
	case strings.IndexByte(s, 0) >= 0:
		return invalidf("%s has a NUL byte, which not every fenced store can hold", name)
	case !utf8.ValidString(s):
		return invalidf("%s is not valid UTF-8", name)
	}
	return nil
}

// invalidf is an error matching ErrInvalid in fenced's name: the guards'
// shared checks report as the family's.
func invalidf(format string, args ...any) error {
	return invalid.Errorf("fenced", format, args...)
}
