package bedrock

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

var update = flag.Bool("update", false, "rewrite the .eventstream fixtures from their .events.json sources")

// eventsSource is a readable description of a binary event stream
// fixture: the messages, in order, and an optional defect.
type eventsSource struct {
	Note     string `json:"note"`
	Messages []struct {
		Headers [][2]string     `json:"headers"`
		Payload json.RawMessage `json:"payload"`
	} `json:"messages"`
	CutTail      int  `json:"cut_tail"`      // drop this many bytes from the end
	CorruptFrame *int `json:"corrupt_frame"` // flip a payload byte of this frame
}

// encodeSource frames a source with the AWS SDK's own encoder, so the
// fixtures are what AWS code produces, not what this package expects.
func encodeSource(t *testing.T, src eventsSource) []byte {
	t.Helper()
	enc := eventstream.NewEncoder()
	var out bytes.Buffer
	for i, m := range src.Messages {
		msg := eventstream.Message{}
		for _, h := range m.Headers {
			msg.Headers = append(msg.Headers, eventstream.Header{Name: h[0], Value: eventstream.StringValue(h[1])})
		}
		var payload bytes.Buffer
		if err := json.Compact(&payload, m.Payload); err != nil {
			t.Fatal(err)
		}
		msg.Payload = payload.Bytes()
		if err := enc.Encode(&out, msg); err != nil {
			t.Fatal(err)
		}
		if src.CorruptFrame != nil && *src.CorruptFrame == i {
			out.Bytes()[out.Len()-5] ^= 0x20 // the payload's last byte
		}
	}
	b := out.Bytes()
	return b[:len(b)-src.CutTail]
}

// TestEventStreamFixtures checks that every .eventstream fixture is its
// source, encoded by the AWS SDK (run with -update to rewrite them).
func TestEventStreamFixtures(t *testing.T) {
	sources, err := filepath.Glob(filepath.Join(string(fixtures), "*.events.json"))
	if err != nil || len(sources) == 0 {
		t.Fatalf("no event sources (%v)", err)
	}
	for _, path := range sources {
		name := strings.TrimSuffix(filepath.Base(path), ".events.json") + ".eventstream"
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var src eventsSource
			if err := json.Unmarshal(raw, &src); err != nil {
				t.Fatal(err)
			}
			want := encodeSource(t, src)
			target := filepath.Join(string(fixtures), name)
			if *update {
				if err := os.WriteFile(target, want, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := os.ReadFile(target)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from its source; run go test -run TestEventStreamFixtures -update", name)
			}
		})
	}
}
