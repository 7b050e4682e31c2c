package fence

import (
	"fmt"
	"strings"
	"unicode/utf8"
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
		return invalid("empty resource")
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
		return invalid("negative token %d", token)
	}
	return nil
}

// validText applies a resource's limits, other than being empty, to s,
// which name says what it is.
func validText(name, s string) error {
	switch {
	case len(s) > MaxResourceLen:
		return invalid("%s is %d bytes, over the limit of %d", name, len(s), MaxResourceLen)
	case strings.IndexByte(s, 0) >= 0:
		return invalid("%s has a NUL byte, which a fence table's text cannot hold", name)
	case !utf8.ValidString(s):
		return invalid("%s is not valid UTF-8", name)
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
