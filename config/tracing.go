package config

import (
	"maps"
	"net"
	"slices"

	"golang.org/x/net/http/httpguts"
)

// The defaults of the tracing section, which belongs to the binary: the
// server takes a TracerProvider, and the binary builds one from this.
const (
	// DefaultTracingProtocol is the OTLP transport when the tracing
	// section names none.
	DefaultTracingProtocol = "grpc"
	// DefaultSampleRatio is the share of traces sampled that do not come
	// with a sampling decision (no traceparent from Envoy or the client)
	// when the tracing section sets no sample_ratio: all of them, as the
	// OpenTelemetry SDK does by default.
	DefaultSampleRatio = 1.0
)

// Tracing is the tracing section: where the OTLP exporter sends the
// server's spans. Tracing is off (Config.Tracing is nil) when the file
// has no such section.
type Tracing struct {
	// Endpoint is the OTLP collector's host:port (4317 for gRPC, 4318
	// for HTTP by convention).
	Endpoint string
	// Protocol is "grpc" (OTLP/gRPC) or "http" (OTLP/HTTP, protobuf, to
	// the /v1/traces path).
	Protocol string
	// SampleRatio is the share of traces without a parent's sampling
	// decision that are sampled, 0 to 1; a parent's decision (Envoy's,
	// or the client's traceparent flag) is followed.
	SampleRatio float64
	// Insecure sends in plain text rather than TLS.
	Insecure bool
	// Headers are sent with every export (a hosted collector's API
	// key, say).
	Headers map[string]string
}

// tracingFile is the tracing section as written.
type tracingFile struct {
	OTLPEndpoint string            `yaml:"otlp_endpoint"`
	Protocol     string            `yaml:"protocol"`
	SampleRatio  *float64          `yaml:"sample_ratio"`
	Insecure     bool              `yaml:"insecure"`
	Headers      map[string]string `yaml:"headers"`
	// Attributes are the identity attributes whose values spans carry.
	Attributes []string `yaml:"attributes"`
}

func (c *Config) tracing(f *file, p *problems) {
	tf := f.Tracing
	if tf == nil {
		return
	}
	t := &Tracing{Endpoint: tf.OTLPEndpoint, Protocol: tf.Protocol, SampleRatio: DefaultSampleRatio,
		Insecure: tf.Insecure, Headers: tf.Headers}
	if t.Protocol == "" {
		t.Protocol = DefaultTracingProtocol
	}
	switch {
	case t.Endpoint == "":
		p.add("tracing.otlp_endpoint", "required: the collector's host:port")
	default:
		if host, port, err := net.SplitHostPort(t.Endpoint); err != nil || host == "" || port == "" {
			p.add("tracing.otlp_endpoint", "%q is not host:port", t.Endpoint)
		}
	}
	switch t.Protocol {
	case "grpc", "http":
	default:
		p.add("tracing.protocol", "%q is not grpc or http", t.Protocol)
	}
	if r := tf.SampleRatio; r != nil {
		if !(*r >= 0 && *r <= 1) {
			p.add("tracing.sample_ratio", "%v is not between 0 and 1", *r)
		}
		t.SampleRatio = *r
	}
	for _, k := range slices.Sorted(maps.Keys(t.Headers)) {
		if !httpguts.ValidHeaderFieldName(k) {
			p.add("tracing.headers."+k, "%q is not a header name", k)
		}
	}
	c.Tracing = t
	c.Server.TraceAttributes = tf.Attributes
}
