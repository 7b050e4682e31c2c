package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// metricsEvery is how often the metrics are written out.
const metricsEvery = 30 * time.Second

// newTelemetry returns the providers every redfence package is given
// (WithTracerProvider, WithMeterProvider), writing JSON lines to w. A
// service in production swaps the stdout exporters for OTLP ones
// (otlptracegrpc, otlpmetricgrpc); the rest stays. Setting them as otel's
// globals would do too: every package defaults to those.
func newTelemetry(w io.Writer, replica string) (*sdktrace.TracerProvider, *sdkmetric.MeterProvider, error) {
	w = &lockedWriter{w: w} // the two exporters write at once
	res := resource.NewSchemaless(
		attribute.String("service.name", "redfence-service"),
		attribute.String("service.instance.id", replica))
	spans, err := stdouttrace.New(stdouttrace.WithWriter(w))
	if err != nil {
		return nil, nil, err
	}
	metrics, err := stdoutmetric.New(stdoutmetric.WithWriter(w))
	if err != nil {
		return nil, nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(spans), sdktrace.WithResource(res))
	mp := sdkmetric.NewMeterProvider(
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metrics, sdkmetric.WithInterval(metricsEvery))),
		sdkmetric.WithResource(res))
	return tp, mp, nil
}

// shutdownTelemetry flushes what is buffered and stops the exporters.
func shutdownTelemetry(tp *sdktrace.TracerProvider, mp *sdkmetric.MeterProvider, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := errors.Join(tp.Shutdown(ctx), mp.Shutdown(ctx)); err != nil {
		log.Error("telemetry shutdown", "err", err)
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
