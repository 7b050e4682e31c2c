package fenced

import (
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/fenced/fence"
	"github.com/redfence/redfence/fenced/internal/guardopt"
)

// An Option configures a Guard. Nil options are ignored.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config = guardopt.Config

// DefaultTable is the fence table's name unless WithTable says otherwise.
const DefaultTable = "redfence_fences"

// WithTable names the fence table: "name" or "schema.name". Each part is
// quoted as an identifier, so it is used exactly as given (case included);
// a part may not be empty, longer than 63 bytes, contain a dot or a NUL, or
// be invalid UTF-8: New reports such a name as ErrInvalid.
// Migrate does not create the schema. Default: DefaultTable, in the
// connection's search_path.
func WithTable(name string) Option {
	return optionFunc(func(c *config) { c.Table = name })
}

// WithTracerProvider sets where spans go. Default, and for a nil tp (typed
// nil included): the global provider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.Tracer = tp })
}

// quoteTable validates a table name and returns it quoted for SQL.
func quoteTable(name string) (string, error) {
	parts, err := fence.SplitTable(name)
	if err != nil {
		return "", err
	}
	return pgx.Identifier(parts).Sanitize(), nil
}

// WithMeterProvider sets where metrics go. Default, and for a nil mp (typed
// nil included): the global provider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.Meter = mp })
}
