package idempotency

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestParseKey covers what a client cannot send through net/http (bytes
// its transport refuses) besides the grammar the HTTP tests cover: a key
// is visible ASCII, bare or quoted, and both forms name the same key.
func TestParseKey(t *testing.T) {
	uuid := "8e03978e-40d5-43e8-bc93-6894a57f9324"
	for _, tc := range []struct {
		in   string
		want string // "" for an error
	}{
		{`"abc"`, "abc"},
		{`abc`, "abc"},
		{uuid, uuid},
		{`"` + uuid + `"`, uuid},
		{`"a\"b\\c"`, `a"b\c`},
		{`a"b\c`, `a"b\c`},
		{"\"a\x7fb\"", ""},
		{"a\x7fb", ""},
		{"\"a\x1fb\"", ""},
		{"\"a\tb\"", ""},
		{"a\tb", ""},
		{`tok en`, ""},
		{"é", ""},
		{`"a\`, ""},
		{`"a"b"`, ""},
		{`*tok`, "*tok"},
		{`"` + strings.Repeat("x", 255) + `"`, strings.Repeat("x", 255)},
		{strings.Repeat("x", 255), strings.Repeat("x", 255)},
		{`"` + strings.Repeat("x", 256) + `"`, ""},
		{strings.Repeat("x", 256), ""},
		{`""`, ""},
	} {
		got, present, err := parseKey([]string{tc.in}, DefaultMaxKeyLen)
		assert.True(t, present)
		if tc.want == "" {
			if assert.Error(t, err, "%q", tc.in) {
				assert.Contains(t, err.Error(), "visible ASCII characters (a UUID, say), bare or in double quotes", "the 400 says what is accepted")
			}
			continue
		}
		if assert.NoError(t, err, "%q", tc.in) {
			assert.Equal(t, tc.want, got)
		}
	}
}

// TestRecordIDParts: no two scope and key pairs share an id, however their
// bytes are split between them.
func TestRecordIDParts(t *testing.T) {
	ids := map[string]bool{}
	for _, p := range [][2]string{
		{"ab", "ck"}, {"a", "bck"}, {"abc", "k"}, {"abck", ""}, {"", "abck"},
	} {
		id := recordID(p[0], p[1])
		assert.False(t, ids[id], "%q", p)
		ids[id] = true
	}
}
