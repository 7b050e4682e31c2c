package fence_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/redfence/redfence/fenced/fence"
)

func TestStaleTokenError(t *testing.T) {
	err := error(&fence.StaleTokenError{Resource: "r" + strings.Repeat("ü", 40), Token: 3, Highest: 5})
	if !errors.Is(err, fence.ErrStaleToken) {
		t.Fatal("a *StaleTokenError must match ErrStaleToken")
	}
	if errors.Is(err, fence.ErrInvalid) || errors.Is(err, fence.ErrNotMigrated) {
		t.Fatal("a *StaleTokenError matches only ErrStaleToken")
	}
	want := `fenced: stale token 3 for resource "r` + strings.Repeat("ü", 31) + `...": 5 was already accepted`
	if got := err.Error(); got != want {
		t.Fatalf("message\n got %s\nwant %s", got, want)
	}
}

func TestValidate(t *testing.T) {
	long := strings.Repeat("é", fence.MaxResourceLen/2)
	for _, tc := range []struct {
		name string
		err  error
		msg  string // "" means valid
	}{
		{"resource at the limit", fence.ValidateResource(long), ""},
		{"resource over the limit", fence.ValidateResource(long + "x"), "resource is 1025 bytes, over the limit of 1024"},
		{"empty resource", fence.ValidateResource(""), "empty resource"},
		{"NUL", fence.ValidateResource("a\x00b"), "NUL"},
		{"bad UTF-8", fence.ValidateResource("a\xffb"), "UTF-8"},
		{"empty prefix", fence.ValidatePrefix(""), ""},
		{"prefix over the limit", fence.ValidatePrefix(long + "x"), "prefix is 1025 bytes"},
		{"token 0", fence.ValidateToken(0), ""},
		{"MaxInt64", fence.ValidateToken(math.MaxInt64), ""},
		{"negative token", fence.ValidateToken(-1), "negative token -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.msg == "" {
				if tc.err != nil {
					t.Fatalf("want nil, got %v", tc.err)
				}
				return
			}
			if !errors.Is(tc.err, fence.ErrInvalid) || !strings.Contains(tc.err.Error(), tc.msg) {
				t.Fatalf("want ErrInvalid with %q, got %v", tc.msg, tc.err)
			}
		})
	}
}
