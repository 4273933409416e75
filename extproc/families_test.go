package extproc_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// unmeteredCase is a call of an unmetered family, and the error shape
// its provider's clients read.
type unmeteredCase struct {
	family, method, path string
	headers              [][2]string
	shape                string // openai, anthropic, google, aws
}

// unmeteredCases are calls of every unmetered family, in the spellings a
// provider's router serves: a gateway prefix, Azure's paths, Vertex AI's,
// another case, ";" parameters, an escape.
var unmeteredCases = []unmeteredCase{
	{"openai.batches", "POST", "/v1/batches", nil, "openai"},
	{"openai.batches", "GET", "/v1/batches/batch_1", nil, "openai"},
	{"openai.batches", "POST", "/openai/batches?api-version=2024-10-21", nil, "openai"},
	{"openai.batches", "POST", "/v1/Batches;x=1", nil, "openai"},
	{"openai.files", "POST", "/v1/files", nil, "openai"},
	{"openai.files", "POST", "/gateway/v1/uploads/upload_1/parts", nil, "openai"},
	{"openai.files", "POST", "/v1/files", [][2]string{{"anthropic-version", "2023-06-01"}}, "anthropic"},
	{"openai.realtime", "GET", "/v1/realtime?model=gpt-realtime", [][2]string{{"upgrade", "websocket"}, {"connection", "Upgrade"}}, "openai"},
	{"openai.realtime", "POST", "/v1/realtime/client_secrets", nil, "openai"},
	{"openai.realtime", "GET", "/openai/realtime?deployment=rt&api-version=2024-10-01-preview", nil, "openai"},
	{"openai.images", "POST", "/v1/images/generations", nil, "openai"},
	{"openai.images", "POST", "/openai/deployments/dalle/images/generations?api-version=2024-10-21", nil, "openai"},
	{"openai.audio", "POST", "/v1/audio/speech", nil, "openai"},
	{"openai.audio", "POST", "/openai/deployments/whisper/audio/transcriptions", nil, "openai"},
	{"openai.fine_tuning", "POST", "/v1/fine_tuning/jobs", nil, "openai"},
	{"openai.assistants", "POST", "/v1/threads/thread_1/runs", nil, "openai"},
	{"openai.assistants", "POST", "/v1/threads/runs", nil, "openai"},
	{"openai.assistants", "POST", "/v1/vector_stores", nil, "openai"},
	{"openai.videos", "POST", "/v1/videos", nil, "openai"},
	{"openai.evals", "POST", "/v1/evals/eval_1/runs", nil, "openai"},
	{"openai.containers", "POST", "/v1/containers", nil, "openai"},
	{"openai.chatkit", "POST", "/v1/chatkit/sessions", nil, "openai"},
	{"anthropic.batches", "POST", "/v1/messages/batches", nil, "anthropic"},
	{"anthropic.batches", "GET", "/v1/messages/batches/msgbatch_1/results", nil, "anthropic"},
	{"anthropic.complete", "POST", "/v1/complete", nil, "anthropic"},
	{"anthropic.agents", "POST", "/v1/sessions/sesn_1/events", [][2]string{{"anthropic-version", "2023-06-01"}}, "anthropic"},
	{"anthropic.agents", "POST", "/v1/deployments/dep_1/run", [][2]string{{"anthropic-version", "2023-06-01"}}, "anthropic"},
	{"gemini.batches", "POST", "/v1beta/models/gemini-2.5-flash:batchGenerateContent", nil, "google"},
	{"gemini.batches", "POST", "/v1beta/models/gemini-2.5-flash%3AbatchGenerateContent", nil, "google"},
	{"gemini.batches", "POST", "/v1beta/models/gemini-embedding-001:asyncBatchEmbedContent", nil, "google"},
	{"gemini.batches", "GET", "/v1beta/batches/b1", nil, "google"},
	{"gemini.batches", "POST", "/v1/projects/p/locations/us-central1/batchPredictionJobs", nil, "google"},
	{"gemini.cached_contents", "POST", "/v1beta/cachedContents", nil, "google"},
	{"gemini.cached_contents", "PATCH", "/v1/projects/p/locations/us-central1/cachedContents/c1", nil, "google"},
	{"gemini.live", "GET", "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent", nil, "google"},
	{"vertex.predict", "POST", "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5:rawPredict", nil, "google"},
	{"vertex.predict", "POST", "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5:streamRawPredict", nil, "google"},
	{"vertex.predict", "POST", "/v1beta/models/imagen-4.0-generate-001:predict", nil, "google"},
	{"vertex.predict", "POST", "/v1beta/models/veo-3.0-generate-001:predictLongRunning", nil, "google"},
	{"bedrock.invoke_other", "POST", "/model/amazon.titan-text-express-v1/invoke", nil, "aws"},
	{"bedrock.invoke_other", "POST", "/model/meta.llama3-70b-instruct-v1%3A0/invoke-with-response-stream", nil, "aws"},
	{"bedrock.async_invoke", "POST", "/async-invoke", nil, "aws"},
	{"bedrock.batch", "POST", "/model-invocation-job", nil, "aws"},
	{"bedrock.agents", "POST", "/agents/A1/agentAliases/AL1/sessions/s1/text", nil, "aws"},
	{"bedrock.agents", "POST", "/retrieveAndGenerate", nil, "aws"},
}

// TestUnmeteredFamiliesAreRefused: a call of every unmetered family, in
// every spelling, is refused with a 403 in its provider's error shape,
// never reaches the upstream, reserves nothing and is counted as
// refused. Before, each was forwarded, counted as one request of api
// "other".
func TestUnmeteredFamiliesAreRefused(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := newRig(t, []accounting.Limit{
		{Name: "rpm", Dimension: accounting.Requests, Scope: []string{"tenant"}, Limit: 1000, Window: time.Minute},
	}, withServer(func(o *extproc.Options) { o.Registerer = reg }))
	seen := map[string]int{}
	for _, tc := range unmeteredCases {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req := envoytest.Request{Method: tc.method, Path: tc.path,
				Headers: append([][2]string{{"x-tenant-id", "a"}, {"content-type", "application/json"}}, tc.headers...)}
			if tc.method != "GET" {
				req.Body = []byte(`{"model":"m"}`)
			}
			resp := r.envoy.Do(t.Context(), req, nil)
			wantStatus(t, resp, 403)
			if resp.Upstream != nil {
				t.Fatal("the upstream was called")
			}
			wantErrorShape(t, tc.shape, resp)
			seen[tc.family]++
		})
	}
	if got := r.used(t, "rpm", accounting.Attributes{{Name: "tenant", Value: "a"}}); got != 0 {
		t.Errorf("rpm used by refused calls: %d, want 0", got)
	}
	for _, f := range extproc.UnmeteredFamilies() {
		if seen[f] == 0 {
			t.Errorf("family %s: no case", f)
		}
		if got := gathered(t, reg, "tokenwarden_requests_total", f, "refused"); got != float64(seen[f]) {
			t.Errorf(`tokenwarden_requests_total{api=%q,outcome="refused"}: got %v, want %d`, f, got, seen[f])
		}
	}
}

// wantErrorShape checks that resp's body is tokenwarden's 403 in shape.
func wantErrorShape(t *testing.T, shape string, resp *envoytest.Response) {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		t.Fatalf("body %s: %v", resp.Body, err)
	}
	errObj, _ := body["error"].(map[string]any)
	var ok bool
	switch shape {
	case "openai":
		ok = errObj["code"] == "unmetered_api_refused" && errObj["message"] != nil
	case "anthropic":
		ok = body["type"] == "error" && errObj["type"] == "permission_error"
	case "google":
		ok = errObj["code"] == float64(403) && errObj["status"] == "PERMISSION_DENIED"
	case "aws":
		ok = body["message"] != nil && resp.Header.Get("x-amzn-errortype") == "AccessDeniedException"
	}
	if !ok {
		t.Errorf("body %s (x-amzn-errortype %q): not %s's 403 shape", resp.Body, resp.Header.Get("x-amzn-errortype"), shape)
	}
}

// TestAllowedUnmeteredFamilyIsCountedAsARequest: a family the options
// allow reaches the upstream untouched and counts once on the requests
// dimension, as a request of its own api, which a limit can match; the
// families not allowed stay refused.
func TestAllowedUnmeteredFamilyIsCountedAsARequest(t *testing.T) {
	r := newRig(t, []accounting.Limit{
		{Name: "batches", Dimension: accounting.Requests, Scope: []string{"tenant"}, Match: map[string]string{"api": "openai.batches"},
			Limit: 1, Window: time.Minute},
		{Name: "tokens", Dimension: accounting.Tokens, Scope: []string{"tenant"}, Limit: 1, Window: time.Minute},
	}, withServer(func(o *extproc.Options) { o.AllowUnmetered = map[string]bool{"openai.batches": true} }))
	body := []byte(`{"input_file_id":"file-abc","endpoint":"/v1/chat/completions","completion_window":"24h"}`)
	req := envoytest.Request{Method: "POST", Path: "/v1/batches", Headers: [][2]string{{"x-tenant-id", "a"}, {"content-type", "application/json"}}, Body: body}
	resp := r.envoy.Do(t.Context(), req, jsonUpstream(200, []byte(`{"id":"batch_1","object":"batch"}`)))
	wantStatus(t, resp, 200)
	if resp.Upstream == nil || string(resp.Upstream.Body) != string(body) {
		t.Fatalf("upstream: got %v, want the body untouched", resp.Upstream)
	}
	if got := r.used(t, "batches", accounting.Attributes{{Name: "tenant", Value: "a"}, {Name: "api", Value: "openai.batches"}}); got != 1 {
		t.Errorf("batches used: got %d, want 1", got)
	}
	// The limit on the family's api holds it.
	wantStatus(t, r.envoy.Do(t.Context(), req, jsonUpstream(200, []byte(`{}`))), 429)
	// Another family stays refused.
	req.Path = "/v1/files"
	wantStatus(t, r.envoy.Do(t.Context(), req, nil), 403)
}

// TestLookalikePathsPass: paths that only resemble a family's — an
// Anthropic-only name without Anthropic's version header, a resource
// named like a family below no API root — are some other
// application's, and pass.
func TestLookalikePathsPass(t *testing.T) {
	r := newRig(t, nil)
	for _, p := range []string{"/v1/sessions/s1/events", "/api/batches", "/shop/images/cat.png", "/v1/models", "/v1/messages/count_tokens"} {
		resp := r.envoy.Do(t.Context(), envoytest.Request{Method: "POST", Path: p, Body: []byte(`{}`)}, jsonUpstream(200, []byte(`{}`)))
		wantStatus(t, resp, 200)
		if resp.Upstream == nil {
			t.Errorf("%s: the upstream was not called", p)
		}
	}
}

// TestUnknownUnmeteredFamilyIsAConfigError: an allowed family that does
// not exist is named in the error.
func TestUnknownUnmeteredFamilyIsAConfigError(t *testing.T) {
	o := extproc.Options{AllowUnmetered: map[string]bool{"openai.batch": true}}
	err := o.Validate()
	if want := "unmetered_apis.openai.batch: is not an unmetered API family"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Validate: got %v, want an error starting with %q", err, want)
	}
}
