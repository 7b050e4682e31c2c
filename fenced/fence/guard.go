package fence

import (
	"context"

	"github.com/redfence/redfence/internal/typednil"
)

// Required returns nil for a store handle a guard's New can use, and an
// error matching ErrInvalid for a nil one or a typed nil (a nil *sql.DB in
// the interface), whose methods would panic; what names the handle.
func Required(what string, v any) error {
	switch {
	case v == nil:
		return invalidf("nil %s", what)
	case typednil.Is(v):
		return invalidf("nil %s: a nil %T", what, v)
	}
	return nil
}

// Usable returns the error matching ErrInvalid that a guard's call reports
// before any round trip, in this order: for a nil guard (isNil), one not
// made by New (!made), a nil ctx, then the first claim outside the limits
// (ValidateResource, ValidateToken). kind names the guard's type: "Guard",
// "Fence".
func Usable(ctx context.Context, kind string, isNil, made bool, claims ...Claim) error {
	switch {
	case isNil:
		return invalidf("nil %s", kind)
	case !made:
		return invalidf("zero %s: make one with New", kind)
	case ctx == nil:
		return invalidf("nil context")
	}
	for _, c := range claims {
		if err := validClaim(c); err != nil {
			return err
		}
	}
	return nil
}

// UsableAll is Usable, then Canonical: the claims a multi-resource call
// records, in the order it records them.
func UsableAll(ctx context.Context, kind string, isNil, made bool, claims []Claim) ([]Claim, error) {
	if err := Usable(ctx, kind, isNil, made); err != nil {
		return nil, err
	}
	return Canonical(claims)
}

func validClaim(c Claim) error {
	if err := ValidateResource(c.Resource); err != nil {
		return err
	}
	return ValidateToken(c.Token)
}
