package llmtest

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// maxSeed bounds a seed: the fuzzer mutates seeds byte by byte, so a big
// one (a 240 KiB embeddings reply) only slows it down. The last 64 KiB
// keep the usage object, which providers put at the end.
const maxSeed = 64 << 10

// AddResponseSeeds adds to f, as seeds for [FuzzReader], the response
// fixtures of d (those cases.json lists) whose names end in suffix, each
// cut in the middle.
func AddResponseSeeds(f *testing.F, d Dir, suffix string) {
	f.Helper()
	for _, tc := range loadCases(f, d).Responses {
		if !strings.HasSuffix(tc.File, suffix) {
			continue
		}
		b := d.Read(f, tc.File)
		if len(b) > maxSeed {
			b = b[len(b)-maxSeed:]
		}
		f.Add(b, uint16(len(b)/2))
	}
}

// FuzzReader fuzzes the readers newReader returns with a body and where
// to cut it in two. A reader must not panic, must report the same whole
// and cut (Envoy may cut a body anywhere), and must report no negative
// count and no more cached input than input, whatever the body says:
// either would price a response below nothing.
func FuzzReader(f *testing.F, newReader func() llm.UsageReader) {
	f.Helper()
	f.Fuzz(func(t *testing.T, body []byte, cut uint16) {
		c := int(cut) % (len(body) + 1)
		whole, split := feed(newReader, body), feed(newReader, body, c)
		if whole != split {
			t.Fatalf("split at %d: got %+v, whole body gave %+v", c, split, whole)
		}
		u := whole.Usage
		if u.InputTokens < 0 || u.OutputTokens < 0 || u.CachedInputTokens > u.InputTokens {
			t.Fatalf("implausible usage %+v", u)
		}
	})
}

// RequestTarget is an API whose ParseRequest and Inject a request fuzz
// target exercises.
type RequestTarget struct {
	API llm.API
	// Path is the :path bodies are sent to; where the path is fuzzed
	// too ([FuzzRequestPaths]), the path the fuzzer starts from.
	Path string
	// NoOutput marks an API whose requests have no output (embeddings):
	// its output cap must be zero rather than at least one.
	NoOutput bool
	// Model is the ParseOptions.Model requests are parsed with (an Azure
	// deployment's), if any.
	Model string
	// View is the provider's reading of a body, for [CheckDifferential];
	// nil skips that check.
	View View
	// Knobs describe the API's request bodies, for [Bodies]: the fuzz
	// targets are seeded with some, [RunDifferential] checks many.
	Knobs []Knob
}

// seedBodies is how many bodies from a target's knobs seed its fuzz
// target (and so run in every test run).
const seedBodies = 64

// FuzzRequests fuzzes request bodies, seeded with the request fixtures of
// d and bodies made from the targets' knobs, through every target: see
// [CheckRequest].
func FuzzRequests(f *testing.F, d Dir, targets ...RequestTarget) {
	f.Helper()
	for _, b := range requestBodies(f, d) {
		f.Add(b)
	}
	for i, target := range targets {
		for _, b := range Bodies(uint64(i), seedBodies, target.Knobs) {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, target := range targets {
			CheckRequest(t, target, target.Path, body)
		}
	})
}

// FuzzRequestPaths is [FuzzRequests] for an API that reads the model from
// the path (Gemini, Bedrock): the fuzzer varies the path as well as the
// body, starting from target.Path.
func FuzzRequestPaths(f *testing.F, d Dir, target RequestTarget) {
	f.Helper()
	for _, b := range requestBodies(f, d) {
		f.Add(target.Path, b)
	}
	for _, b := range Bodies(0, seedBodies, target.Knobs) {
		f.Add(target.Path, b)
	}
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		CheckRequest(t, target, path, body)
	})
}

// CheckRequest parses body, sent to path, with target.API. It may refuse
// the body; what it accepts must be plausible (a model, no negative
// input, an output cap of at least one unless the API has no output, at
// least one choice), explained part by part ([CheckExplained]), and
// Inject must then accept the body too: a request that was admitted must
// not fail on its way to the provider. With a View, the reservation must
// also be what the provider does ([CheckDifferential]).
func CheckRequest(t *testing.T, target RequestTarget, path string, body []byte) {
	t.Helper()
	api := target.API
	opts := ParseOptions()
	opts.Model = target.Model
	CheckExplained(t, api, path, body, opts)
	req, err := api.ParseRequest(path, body, opts)
	if err != nil {
		return
	}
	badCap := req.OutputCap < 1
	if target.NoOutput {
		badCap = req.OutputCap != 0
	}
	if req.Model == "" || req.InputTokens < 0 || badCap || req.Choices < 1 {
		t.Fatalf("%s: implausible request %+v", api.Name(), req)
	}
	if _, err := api.Inject(body, &req, llm.InjectOptions{OutputCap: true, StreamUsage: true}); err != nil {
		t.Fatalf("%s: Inject failed on a body that parsed: %v", api.Name(), err)
	}
	CheckInjectBuf(t, api, body, req)
	if target.View != nil {
		opts := DiffOptions()
		opts.Model = target.Model
		CheckDifferential(t, target, path, body, opts)
	}
}

// CheckInjectBuf holds api's edits of body written into a lent buffer
// ([llm.InjectOptions.Buf]) to those it allocates: for each set of
// edits, streamed or not, and buffers too small for any edit, for the
// body but not its edits, for one edit, and for all of them, filled with
// marks that would show in a body that took bytes it should not, the
// same bytes or the same error, and body itself untouched.
func CheckInjectBuf(t *testing.T, api llm.API, body []byte, req llm.Request) {
	t.Helper()
	orig := bytes.Clone(body)
	for _, opts := range []llm.InjectOptions{{OutputCap: true, StreamUsage: true}, {StreamUsage: true}, {OutputCap: true}} {
		for _, stream := range []bool{true, false} {
			r := req
			r.Stream = stream
			want, wantErr := api.Inject(body, &r, opts)
			for _, room := range []int{1, len(body), len(body) + 12, len(body) + 128} {
				o := opts
				o.Buf = bytes.Repeat([]byte{'#'}, room)[:0]
				r := req
				r.Stream = stream
				got, err := api.Inject(body, &r, o)
				if fmt.Sprint(err) != fmt.Sprint(wantErr) || !bytes.Equal(got, want) {
					t.Fatalf("%s %+v, stream %v, a buffer of %d bytes: got %q, %v; want %q, %v",
						api.Name(), opts, stream, room, got, err, want, wantErr)
				}
				if !bytes.Equal(body, orig) {
					t.Fatalf("%s %+v, stream %v, a buffer of %d bytes: the body changed to %q", api.Name(), opts, stream, room, body)
				}
			}
		}
	}
}

// RunDifferential checks n bodies made from target's knobs ([Bodies])
// with [CheckExplained] and [CheckDifferential], and reports how many the
// API accepted: a
// differential test that accepts nothing proves nothing, so it fails when
// fewer than minAccepted were.
func RunDifferential(t *testing.T, target RequestTarget, n, minAccepted int) {
	t.Helper()
	opts := DiffOptions()
	opts.Model = target.Model
	accepted := 0
	for _, body := range Bodies(uint64(n), n, target.Knobs) {
		if _, err := target.API.ParseRequest(target.Path, body, opts); err == nil {
			accepted++
		}
		CheckExplained(t, target.API, target.Path, body, opts)
		CheckDifferential(t, target, target.Path, body, opts)
	}
	t.Logf("%s: %d of %d bodies accepted", target.API.Name(), accepted, n)
	if accepted < minAccepted {
		t.Errorf("%s: %d of %d bodies accepted, want at least %d", target.API.Name(), accepted, n, minAccepted)
	}
}

// requestBodies returns the request fixtures of d, those cases.json lists.
func requestBodies(t testing.TB, d Dir) [][]byte {
	t.Helper()
	var out [][]byte
	for _, tc := range loadCases(t, d).Requests {
		out = append(out, d.Read(t, tc.File))
	}
	return out
}
