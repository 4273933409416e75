package main

import (
	"io"
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	defaults := addrs{listen: "127.0.0.1:10000", envoyAdmin: "127.0.0.1:9901", tokenwarden: "127.0.0.1:50051",
		tokenwardenAdmin: "127.0.0.1:9090", fakellm: "127.0.0.1:8081"}
	moved := defaults
	moved.listen = "localhost:18000"
	cases := []struct {
		name    string
		args    []string
		want    addrs
		wantErr string
	}{
		{"defaults", nil, defaults, ""},
		{"moved listener", []string{"-listen", "localhost:18000"}, moved, ""},
		{"not loopback", []string{"-listen", "0.0.0.0:10000"}, addrs{}, "loopback"},
		{"port zero", []string{"-fakellm", "127.0.0.1:0"}, addrs{}, "port number"},
		{"no port", []string{"-tokenwarden", "127.0.0.1"}, addrs{}, "missing port"},
		{"two on one address", []string{"-fakellm", "127.0.0.1:9090"}, addrs{}, "both 127.0.0.1:9090"},
		{"stray argument", []string{"up"}, addrs{}, "unexpected arguments"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, err := parseFlags(c.args, io.Discard)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.addrs != c.want {
				t.Errorf("got %+v, want %+v", o.addrs, c.want)
			}
		})
	}
}

// TestPrefixWriter checks each line of a child's output comes out whole,
// prefixed, however the writes split it.
func TestPrefixWriter(t *testing.T) {
	var out strings.Builder
	g := &group{stdout: &out}
	w := &prefixWriter{g: g, prefix: "x | "}
	for _, chunk := range []string{"one\ntw", "o\n", "", "three"} {
		w.Write([]byte(chunk))
	}
	w.flush()
	if got, want := out.String(), "x | one\nx | two\nx | three\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
