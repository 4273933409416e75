package config

import (
	"maps"
	"strings"
	"testing"
)

func TestParseTracing(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		want  *Tracing
		attrs []string
	}{
		{"absent: off", "", nil, nil},
		{"null: off", "tracing:\n", nil, nil},
		{"defaults", "tracing: {otlp_endpoint: 'collector:4317'}\n",
			&Tracing{Endpoint: "collector:4317", Protocol: DefaultTracingProtocol, SampleRatio: DefaultSampleRatio}, nil},
		{"every setting", `
tracing:
  otlp_endpoint: otel.example:4318
  protocol: http
  sample_ratio: 0.1
  insecure: true
  headers: {x-api-key: secret}
  attributes: [tenant]
`, &Tracing{Endpoint: "otel.example:4318", Protocol: "http", SampleRatio: 0.1, Insecure: true,
			Headers: map[string]string{"x-api-key": "secret"}}, []string{"tenant"}},
		{"sample nothing without a parent", "tracing: {otlp_endpoint: '[::1]:4317', sample_ratio: 0}\n",
			&Tracing{Endpoint: "[::1]:4317", Protocol: DefaultTracingProtocol, SampleRatio: 0}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := parse(t, baseConfig+tt.yaml)
			got := c.Tracing
			switch {
			case (got == nil) != (tt.want == nil):
				t.Fatalf("tracing: got %+v, want %+v", got, tt.want)
			case got == nil:
			case got.Endpoint != tt.want.Endpoint || got.Protocol != tt.want.Protocol || got.SampleRatio != tt.want.SampleRatio ||
				got.Insecure != tt.want.Insecure || !maps.Equal(got.Headers, tt.want.Headers):
				t.Errorf("tracing: got %+v, want %+v", got, tt.want)
			}
			if strings.Join(c.Server.TraceAttributes, ",") != strings.Join(tt.attrs, ",") {
				t.Errorf("trace attributes: got %q, want %q", c.Server.TraceAttributes, tt.attrs)
			}
		})
	}
}

func TestParseTracingErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string // the whole error
	}{
		{"no endpoint", "tracing: {protocol: grpc}\n", "config: tracing.otlp_endpoint: required: the collector's host:port"},
		{"a URL for an endpoint", "tracing: {otlp_endpoint: 'http://collector:4318/v1/traces'}\n",
			`config: tracing.otlp_endpoint: "http://collector:4318/v1/traces" is not host:port`},
		{"no port", "tracing: {otlp_endpoint: 'collector:'}\n", `config: tracing.otlp_endpoint: "collector:" is not host:port`},
		{"unknown protocol", "tracing: {otlp_endpoint: 'c:4317', protocol: zipkin}\n", `config: tracing.protocol: "zipkin" is not grpc or http`},
		{"ratio above one", "tracing: {otlp_endpoint: 'c:4317', sample_ratio: 10}\n", "config: tracing.sample_ratio: 10 is not between 0 and 1"},
		{"negative ratio", "tracing: {otlp_endpoint: 'c:4317', sample_ratio: -0.5}\n", "config: tracing.sample_ratio: -0.5 is not between 0 and 1"},
		{"NaN ratio", "tracing: {otlp_endpoint: 'c:4317', sample_ratio: .nan}\n", "config: tracing.sample_ratio: NaN is not between 0 and 1"},
		{"bad header name", "tracing: {otlp_endpoint: 'c:4317', headers: {'api key': x}}\n", `config: tracing.headers.api key: "api key" is not a header name`},
		{"attribute not an identity attribute", "tracing: {otlp_endpoint: 'c:4317', attributes: [tenant, team]}\n",
			`config: tracing.attributes[1]: "team" is not one of identity.attributes`},
		{"unknown key", "tracing: {endpoint: 'c:4317'}\n", "config: tracing.endpoint: unknown field\nconfig: tracing.otlp_endpoint: required: the collector's host:port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(baseConfig + tt.yaml))
			got := "<nil>"
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}
