package idempotency

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestParseKey covers what a client cannot send through net/http (bytes
// its transport refuses) besides the grammar the HTTP tests cover.
func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		in   string
		bare bool
		want string // "" for an error
	}{
		{`"abc"`, false, "abc"},
		{`"a\"b\\c"`, false, `a"b\c`},
		{"\"a\x7fb\"", false, ""},
		{"\"a\x1fb\"", false, ""},
		{"\"a\tb\"", false, ""},
		{`"a\`, false, ""},
		{`"a"b"`, false, ""},
		{`*tok`, true, "*tok"},
		{`tok en`, true, ""},
		{`"` + strings.Repeat("x", 255) + `"`, false, strings.Repeat("x", 255)},
		{`"` + strings.Repeat("x", 256) + `"`, false, ""},
	} {
		got, present, err := parseKey([]string{tc.in}, tc.bare, DefaultMaxKeyLen)
		assert.True(t, present)
		if tc.want == "" {
			assert.Error(t, err, "%q", tc.in)
			continue
		}
		if assert.NoError(t, err, "%q", tc.in) {
			assert.Equal(t, tc.want, got)
		}
	}
}

// TestRecordIDParts: no two lists of parts share an id, however their
// bytes are split between scope, method, route and key.
func TestRecordIDParts(t *testing.T) {
	ids := map[string]bool{}
	for _, p := range [][4]string{
		{"ab", "POST", "c", "k"}, {"a", "POST", "bc", "k"}, {"abPOST", "", "c", "k"},
		{"ab", "POST", "ck", ""}, {"ab", "POST", "", "ck"}, {"", "abPOST", "c", "k"},
	} {
		id := recordID(p[0], p[1], p[2], p[3])
		assert.False(t, ids[id], "%q", p)
		ids[id] = true
	}
}
