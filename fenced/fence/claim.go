package fence

import (
	"cmp"
	"fmt"
	"slices"
)

// A Claim is one resource a multi-resource write is fenced on, and the
// token its writer holds for it: the token of the lock on that resource.
type Claim struct {
	Resource string
	Token    int64
}

// Canonical returns claims in the order every guard records them: sorted
// by resource, compared as bytes, each resource once. Two guarded writes
// that take the fence rows in this one order never wait for each other in
// a cycle, whatever order their callers listed the resources in.
//
// It returns an error matching ErrInvalid, naming the claim, for no claims,
// a resource or token outside the limits (ValidateResource,
// ValidateToken), or one resource claimed with two different tokens (a
// caller that holds one lock has one token for it). A resource claimed
// twice with the same token counts once. claims is not modified.
func Canonical(claims []Claim) ([]Claim, error) {
	if len(claims) == 0 {
		return nil, invalidf("no claims")
	}
	for i, c := range claims {
		if err := validClaim(c); err != nil {
			return nil, claimError(i, err)
		}
	}
	out := slices.SortedStableFunc(slices.Values(claims), func(a, b Claim) int { return cmp.Compare(a.Resource, b.Resource) })
	n := 1
	for _, c := range out[1:] {
		last := out[n-1]
		switch {
		case c.Resource != last.Resource:
			out[n] = c
			n++
		case c.Token != last.Token:
			return nil, invalidf("resource %q claimed with two tokens, %d and %d", Clip(c.Resource), last.Token, c.Token)
		}
	}
	return out[:n], nil
}

// claimError says which claim broke a limit; err already matches
// ErrInvalid.
func claimError(i int, err error) error { return fmt.Errorf("%w (claim %d)", err, i) }

// Names quotes, for an error message, the first claim's resource (Clip)
// and counts the others: `"a"`, or `"a" and 2 more`.
func Names(claims []Claim) string {
	if len(claims) == 0 {
		return "no resource"
	}
	s := fmt.Sprintf("%q", Clip(claims[0].Resource))
	if len(claims) > 1 {
		s += fmt.Sprintf(" and %d more", len(claims)-1)
	}
	return s
}
