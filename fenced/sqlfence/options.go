package sqlfence

import (
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/fenced/internal/guardopt"
)

// An Option configures a Guard. Nil options are ignored.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config = guardopt.Config

// DefaultTable is the fence table's name unless WithTable says otherwise:
// fenced's, so that a PostgreSQL database has one fence table whichever
// guard writes to it.
const DefaultTable = "redfence_fences"

// WithTable names the fence table: "name" or "schema.name" (MySQL: the
// database; SQLite: an attached database). Each part is quoted as an
// identifier in the dialect's way, so it is used exactly as given; a part
// may not be empty, longer than 63 bytes, contain a dot or a NUL, or be
// invalid UTF-8: New reports such a name as ErrInvalid.
// Migrate does not create the schema. Default: DefaultTable, in the
// connection's default schema (PostgreSQL: search_path; MySQL: the DSN's
// database; SQLite: main).
func WithTable(name string) Option {
	return optionFunc(func(c *config) { c.Table = name })
}

// WithTracerProvider sets where spans go. Default, and for a nil tp (typed
// nil included): the global provider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.Tracer = tp })
}

// WithMeterProvider sets where metrics go. Default, and for a nil mp (typed
// nil included): the global provider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.Meter = mp })
}
