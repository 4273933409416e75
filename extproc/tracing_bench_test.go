package extproc

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BenchmarkProcessTraced is BenchmarkProcess's lifecycle with tracing on,
// every request sampled, its two spans batched to an exporter that drops
// them: what the spans cost beside the untraced figure.
func BenchmarkProcessTraced(b *testing.B) {
	msgs := lifecycleMessages(b, "t1")
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = tp.Shutdown(b.Context()) })
	for _, tc := range []struct {
		name string
		p    processor
	}{
		{"off", lifecycleServer(b)},
		{"on", lifecycleServer(b, func(o *Options) { o.TracerProvider = tp })},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				replay(b, tc.p, msgs)
			}
		})
	}
}
