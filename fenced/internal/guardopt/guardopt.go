// Package guardopt is what the SQL fences' options set: each package keeps
// its own Option type over this one configuration.
package guardopt

import (
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Config is a guard's configuration.
type Config struct {
	Table  string
	Tracer trace.TracerProvider
	Meter  metric.MeterProvider
}
