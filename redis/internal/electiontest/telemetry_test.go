package electiontest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/internal/redistest"
)

// Campaigns, terms, their ends and the time without a leader are counted;
// each campaign is a span with its outcome and term.
func TestTelemetry(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := testCtx(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	e := candidate(t, c, "tel", election.WithTracerProvider(tp), election.WithMeterProvider(mp))
	other := candidate(t, c, "tel")

	term, err := e.Campaign(ctx, "a")
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = e.Campaign(short, "b") // held by a: cancelled
	cancel()
	require.Error(t, err)
	resign(t, term)
	held, err := other.Campaign(ctx, "o")
	require.NoError(t, err)
	resign(t, held)

	spans := rec.Ended()
	require.Len(t, spans, 2)
	assert.Equal(t, "redfence.election.Campaign", spans[0].Name())
	assert.Equal(t, "github.com/redfence/redfence/election", spans[0].InstrumentationScope().Name)
	assert.Contains(t, spans[0].Attributes(), attribute.Int64("redfence.term", term.Token()))
	assert.Contains(t, spans[0].Attributes(), attribute.String("redfence.outcome", "won"))
	assert.Contains(t, spans[1].Attributes(), attribute.String("redfence.outcome", "cancelled"))

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	sums := map[string]int64{}
	hists := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					label := m.Name
					for _, k := range []attribute.Key{"redfence.outcome", "redfence.reason"} {
						if v, ok := dp.Attributes.Value(k); ok {
							label += " " + v.AsString()
						}
					}
					sums[label] += dp.Value
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					hists[m.Name] += dp.Count
				}
			}
		}
	}
	assert.Equal(t, map[string]int64{
		"redfence.election.campaigns won": 1, "redfence.election.campaigns cancelled": 1,
		"redfence.election.terms": 1, "redfence.election.term.ends resigned": 1, "redfence.election.leading": 0,
	}, sums)
	assert.Equal(t, map[string]uint64{"redfence.election.campaign.duration": 2, "redfence.election.leaderless.duration": 1}, hists)
}
