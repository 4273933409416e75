package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/tokenwarden/tokenwarden/config"
)

// newTracerProvider builds the OpenTelemetry SDK's provider for the
// tracing section: an OTLP exporter behind a batching processor, and a
// parent-based sampler, so that a request Envoy (or the client) traced
// is traced here too, one it dropped is dropped here too, and one that
// came without a decision is sampled at the configured ratio. The
// batcher's queue is bounded (the SDK's 2048 spans): a collector that
// is down costs dropped spans, never memory. Shut the provider down on
// exit to flush what is queued.
//
// The SDK reports export failures through OpenTelemetry's process-wide
// error handler; it is pointed at log, as the binary's only user.
func newTracerProvider(ctx context.Context, t *config.Tracing, log *slog.Logger) (*sdktrace.TracerProvider, error) {
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch t.Protocol {
	case "http":
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(t.Endpoint)}
		if t.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		if len(t.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(t.Headers))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	default:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(t.Endpoint)}
		if t.Insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		if len(t.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(t.Headers))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	// The service's name and version, which OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES may override (later sources win).
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "tokenwarden"),
			attribute.String("service.version", strings.TrimPrefix(strings.Fields(versionString())[1], "v"))),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv())
	if err != nil {
		// A malformed OTEL_RESOURCE_ATTRIBUTES: the rest of the
		// resource stands.
		log.Warn("tracing: resource attributes", "err", err)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: span export failed", "err", err)
	}))
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(t.SampleRatio))),
	), nil
}

// shutdownTracing flushes the spans still queued, for at most 5s.
func shutdownTracing(tp *sdktrace.TracerProvider, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		log.Error("tracing: flushing spans at shutdown", "err", err)
	}
}

// tracingSummary is check-config's line on tracing.
func tracingSummary(cfg *config.Config) string {
	t := cfg.Tracing
	if t == nil {
		return "tracing: off"
	}
	transport := "TLS"
	if t.Insecure {
		transport = "plain text"
	}
	line := fmt.Sprintf("tracing: OTLP/%s to %s (%s), spans of requests Envoy or the client sampled, and %g%% of the rest",
		t.Protocol, t.Endpoint, transport, t.SampleRatio*100)
	if len(t.Headers) > 0 {
		line += fmt.Sprintf(", %d export headers", len(t.Headers))
	}
	if attrs := cfg.Server.TraceAttributes; len(attrs) > 0 {
		line += "; spans carry identity " + strings.Join(attrs, ", ")
	} else {
		line += "; no identity values in spans"
	}
	return line
}
