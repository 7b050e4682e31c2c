package fence_test

import (
	"errors"
	"math"
	"slices"
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

func TestCanonical(t *testing.T) {
	in := []fence.Claim{{"b", 2}, {"a", 1}, {"c", 3}, {"a", 1}, {"é", 4}, {"B", 5}}
	keep := slices.Clone(in)
	got, err := fence.Canonical(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []fence.Claim{{"B", 5}, {"a", 1}, {"b", 2}, {"c", 3}, {"é", 4}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v: sorted as bytes, each resource once", got, want)
	}
	if !slices.Equal(in, keep) {
		t.Fatalf("the caller's claims were modified: %v", in)
	}

	for _, tc := range []struct {
		name   string
		claims []fence.Claim
		msg    string
	}{
		{"nil", nil, "no claims"},
		{"empty", []fence.Claim{}, "no claims"},
		{"empty resource", []fence.Claim{{"a", 1}, {"", 1}}, "empty resource (claim 1)"},
		{"negative token", []fence.Claim{{"a", 1}, {"b", -1}}, "negative token -1 (claim 1)"},
		{"NUL", []fence.Claim{{"a\x00", 1}}, "NUL byte"},
		{"two tokens for one resource", []fence.Claim{{"b", 1}, {"a", 3}, {"b", 2}}, `resource "b" claimed with two tokens, 1 and 2`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fence.Canonical(tc.claims)
			if !errors.Is(err, fence.ErrInvalid) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("want ErrInvalid with %q, got %v", tc.msg, err)
			}
		})
	}
}
