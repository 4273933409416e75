package openai

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tokenwarden/tokenwarden/internal/llm"
)

// FuzzChatInject holds Chat.Inject with the Shape its parse keeps to
// Inject without one, which edits as llm.SetField does: for every body
// the parse accepts, streamed or not, with and without a cap, the same
// edited bytes or the same error, for each set of edits.
func FuzzChatInject(f *testing.F) {
	for _, tc := range chatScanCases {
		f.Add([]byte(tc.body))
	}
	paths, err := filepath.Glob("../../../testdata/openai/*request*.json")
	if err != nil || len(paths) == 0 {
		f.Fatalf("no request fixtures (%v)", err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"model":"gpt-4o-mini","stream":true,"max_tokens":512,"messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(` {"model":"o3","stream":true,"messages":[]} ` + "\n"))
	f.Add([]byte(`{"stream":true,"stream_options":null,"model":"m","messages":[]}`))
	f.Add([]byte(`{"stream":true,"stream_options":{},"model":"gpt-5","max_tokens":null,"messages":[]}`))
	f.Add([]byte(`{"stream":true,"model":"m","messages":[{"role":"user","content":"stream_options \u0041"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := scanChat(body, llm.ParseOptions{DefaultOutputCap: 100})
		if err != nil {
			return
		}
		if req.Shape == (llm.Shape{}) {
			t.Fatalf("the parse kept no Shape of a body it accepted")
		}
		bare := req
		bare.Shape = llm.Shape{}
		for _, opts := range []llm.InjectOptions{{OutputCap: true, StreamUsage: true}, {StreamUsage: true}, {OutputCap: true}} {
			for _, stream := range []bool{true, false} {
				req.Stream, bare.Stream = stream, stream
				got, gotErr := Chat{}.Inject(body, &req, opts)
				want, wantErr := Chat{}.Inject(body, &bare, opts)
				if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || string(got) != string(want) {
					t.Fatalf("%+v, stream %v: got %q, %v; want %q, %v", opts, stream, got, gotErr, want, wantErr)
				}
			}
		}
	})
}
