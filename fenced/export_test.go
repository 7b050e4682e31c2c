package fenced

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/redfence/redfence/internal/pgfence"
)

// DeclareOnly declares token for resource in tx as g's fence upsert does,
// without recording it or comparing it: the Guard's own check switched
// off, so that a test sees what the trigger alone refuses.
func DeclareOnly(ctx context.Context, g *Guard, tx pgx.Tx, resource string, token int64) error {
	_, err := tx.Exec(ctx, `SELECT `+pgfence.Declare("$3::text::regclass"), resource, token, g.table)
	return err
}
