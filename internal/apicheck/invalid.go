package apicheck

import (
	"errors"
	"testing"

	"github.com/redfence/redfence/mutex"
)

// Case is one way of giving a package bad input: Err's error must match
// mutex.ErrInvalid, and Own (the package's ErrInvalid, nil where it has
// none) must be that very value.
type Case struct {
	Name string
	Own  error
	Err  func() error
}

// CheckInvalid runs cases: each gets an error matching mutex.ErrInvalid,
// and a package's own ErrInvalid is mutex.ErrInvalid.
func CheckInvalid(t *testing.T, cases []Case) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if c.Own != nil && c.Own != mutex.ErrInvalid {
				t.Errorf("the package's ErrInvalid (%v) is not mutex.ErrInvalid", c.Own)
			}
			err := c.Err()
			if !errors.Is(err, mutex.ErrInvalid) {
				t.Errorf("error %v does not match mutex.ErrInvalid", err)
			}
		})
	}
}
