// Package earlytrace installs a TracerProvider as otel's global one during
// package initialisation, when REDFENCE_EARLY_TRACE is set: for tests of
// programs that set the global provider in an init that runs before
// redfence's packages are initialised. It imports only otel packages that
// redfence's do, and its path sorts before theirs, so Go initialises it
// first.
package earlytrace

import (
	"context"
	"os"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// Env is the variable that turns it on.
const Env = "REDFENCE_EARLY_TRACE"

// Provider is the provider installed at init, or nil.
var Provider *Recorder

func init() {
	if os.Getenv(Env) == "" {
		return
	}
	Provider = &Recorder{}
	otel.SetTracerProvider(Provider)
}

// Recorder is a TracerProvider whose spans record and remember their names
// when they end.
type Recorder struct {
	embedded.TracerProvider
	mu    sync.Mutex
	ended []string
}

// Ended returns the names of the spans ended so far.
func (r *Recorder) Ended() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ended...)
}

func (r *Recorder) Tracer(string, ...trace.TracerOption) trace.Tracer { return tracer{r: r} }

type tracer struct {
	embedded.Tracer
	r *Recorder
}

func (t tracer) Start(ctx context.Context, name string, _ ...trace.SpanStartOption) (context.Context, trace.Span) {
	s := &span{r: t.r, name: name}
	return trace.ContextWithSpan(ctx, s), s
}

type span struct {
	noop.Span
	r    *Recorder
	name string
}

func (s *span) IsRecording() bool { return true }

func (s *span) End(...trace.SpanEndOption) {
	s.r.mu.Lock()
	s.r.ended = append(s.r.ended, s.name)
	s.r.mu.Unlock()
}
