package fenced

import (
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// An Option configures a Guard. Nil options are ignored.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	table  string
	tracer trace.TracerProvider
	meter  metric.MeterProvider
}

// DefaultTable is the fence table's name unless WithTable says otherwise.
const DefaultTable = "redfence_fences"

// WithTable names the fence table: "name" or "schema.name". Each part is
// quoted as an identifier, so it is used exactly as given (case included);
// a part may not be empty, longer than 63 bytes, contain a dot or a NUL, or
// be invalid UTF-8: the Guard's methods report such a name as ErrInvalid.
// Migrate does not create the schema. Default: DefaultTable, in the
// connection's search_path.
func WithTable(name string) Option {
	return optionFunc(func(c *config) { c.table = name })
}

// WithTracerProvider sets where spans go. Default, and for a nil tp (typed
// nil included): the global provider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tracer = tp })
}

// quoteTable validates a table name and returns it quoted for SQL.
func quoteTable(name string) (string, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", invalid("table name %q has more than schema.name", clip(name))
	}
	for _, p := range parts {
		switch {
		case p == "":
			return "", invalid("table name %q has an empty part", clip(name))
		case len(p) > 63:
			return "", invalid("table name part %q is %d bytes, longer than PostgreSQL's 63", clip(p), len(p))
		case strings.ContainsRune(p, 0):
			return "", invalid("table name %q contains NUL", clip(name))
		case !utf8.ValidString(p):
			return "", invalid("table name %q is not valid UTF-8", clip(name))
		}
	}
	return pgx.Identifier(parts).Sanitize(), nil
}

// WithMeterProvider sets where metrics go. Default, and for a nil mp (typed
// nil included): the global provider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.meter = mp })
}
