package fenced

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// The SQLSTATEs of a protected table's refusals (class RF is not
// PostgreSQL's): a token lower than the highest recorded, and no token.
const (
	CodeStaleToken = "RF001"
	CodeNoToken    = "RF002"
)

// Refusal maps a protected table's refusal to this package's errors: a
// stale token to a *StaleTokenError (errors.Is ErrStaleToken), a missing
// one to an error matching ErrNoToken. Both also wrap err, so errors.As
// still finds the *pgconn.PgError. Any other err gives nil. Do applies it
// to fn's error and to the commit's; a writer of its own can call it.
func Refusal(err error) error {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || (pg.Code != CodeStaleToken && pg.Code != CodeNoToken) {
		return nil
	}
	var d struct {
		Resource string `json:"resource"`
		Table    string `json:"table"`
		Token    int64  `json:"token"`
		Highest  int64  `json:"highest"`
	}
	_ = json.Unmarshal([]byte(pg.Detail), &d)
	if pg.Code == CodeStaleToken {
		return &refusal{mapped: &StaleTokenError{Resource: d.Resource, Token: d.Token, Highest: d.Highest}, table: d.Table, err: err}
	}
	return &refusal{mapped: ErrNoToken, resource: d.Resource, table: d.Table, err: err}
}

// refusal is a protected table's refusal: mapped (ErrNoToken or a
// *StaleTokenError) and the database's error.
type refusal struct {
	mapped          error
	resource, table string
	err             error
}

func (r *refusal) Error() string {
	msg := r.mapped.Error()
	if r.resource != "" {
		msg += fmt.Sprintf(" (resource %q)", clip(r.resource))
	}
	if r.table != "" {
		msg += " refused by the trigger on " + r.table
	}
	return msg
}

func (r *refusal) Unwrap() []error { return []error{r.mapped, r.err} }
