package envoy

import (
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
)

// TestBrokenConfigsAreRejected proves the validators can fail: each case breaks
// a copy of envoy.yaml in one place, and both the proto decoding and Envoy
// itself must reject it (and say where).
func TestBrokenConfigsAreRejected(t *testing.T) {
	orig := string(readFile(t, "envoy.yaml"))
	cases := []struct {
		name     string
		old, new string
		// goWant and envoyWant are fragments the errors of go-control-plane and of
		// Envoy must contain: proof they failed for this reason and no other.
		goWant, envoyWant string
	}{
		{
			name: "misspelled ext_proc field",
			old:  "message_timeout: 1s", new: "mesage_timeout: 1s",
			goWant: "mesage_timeout", envoyWant: "mesage_timeout",
		},
		{
			name: "wrong processing mode enum",
			old:  "request_body_mode: BUFFERED", new: "request_body_mode: BUFFERD",
			goWant: "BUFFERD", envoyWant: "BUFFERD",
		},
		{
			name: "misspelled cluster field",
			old:  "connect_timeout: 1s", new: "conect_timeout: 1s",
			goWant: "conect_timeout", envoyWant: "conect_timeout",
		},
		{
			name: "out-of-range port",
			old:  "port_value: 50051", new: "port_value: 70000",
			// protoc-gen-validate names the field; Envoy names the rule it broke.
			goWant: "PortValue", envoyWant: "PortValue",
		},
	}
	// Without Envoy (outside CI) the proto half still runs.
	bin, err := findEnvoy()
	if err != nil {
		if inCI() {
			t.Fatal(err)
		}
		t.Logf("checking with go-control-plane only: %v", err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if n := strings.Count(orig, c.old); n != 1 {
				t.Fatalf("envoy.yaml has %d copies of %q, want 1 (update this case)", n, c.old)
			}
			broken := strings.Replace(orig, c.old, c.new, 1)

			err := decodeProto(yamlToMap(t, []byte(broken)), &bootstrapv3.Bootstrap{})
			if err == nil {
				t.Errorf("go-control-plane accepted the broken config, want an error")
			} else if !strings.Contains(err.Error(), c.goWant) {
				t.Errorf("go-control-plane error %q does not mention %q", err, c.goWant)
			}

			if bin == "" {
				return
			}
			out, ok := envoyValidate(t, bin, writeTemp(t, "envoy.yaml", []byte(broken)))
			if ok {
				t.Errorf("envoy --mode validate accepted the broken config:\n%s", out)
			} else if !strings.Contains(out, c.envoyWant) {
				t.Errorf("envoy's error does not mention %q:\n%s", c.envoyWant, out)
			}
		})
	}
}
