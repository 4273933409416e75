package extproc_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/extproc"
)

const mib = 1 << 20

// withRequestBytes bounds the request bytes in flight.
func withRequestBytes(inFlight, perPrincipal int64) rigOption {
	return withServer(func(o *extproc.Options) {
		o.RequestBytes = extproc.RequestBytes{InFlight: inFlight, PerPrincipal: perPrincipal}
	})
}

// headersOnly opens a stream and sends a metered request's headers, with
// the content-length given ("" for none), as Envoy does before it sends
// the body; it returns the stream and the server's reply. Until the body
// follows, the request holds its charge. Cancelling ctx is the client
// leaving.
func headersOnly(t *testing.T, ctx context.Context, r *rig, tenant, length string) (extprocv3.ExternalProcessor_ProcessClient, *extprocv3.ProcessingResponse) {
	t.Helper()
	stream, err := r.envoy.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hv := []*corev3.HeaderValue{
		{Key: ":method", RawValue: []byte("POST")}, {Key: ":path", RawValue: []byte("/v1/chat/completions")},
		{Key: "content-type", RawValue: []byte("application/json")}, {Key: "x-tenant-id", RawValue: []byte(tenant)},
	}
	if length != "" {
		hv = append(hv, &corev3.HeaderValue{Key: "content-length", RawValue: []byte(length)})
	}
	if err := stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: hv}}}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return stream, resp
}

// refusal is an immediate reply's status, headers and OpenAI error code.
type refusal struct {
	status  int
	headers map[string]string
	code    string
}

func refusalOf(t *testing.T, resp *extprocv3.ProcessingResponse) *refusal {
	t.Helper()
	ir := resp.GetImmediateResponse()
	if ir == nil {
		return nil
	}
	r := &refusal{status: int(ir.GetStatus().GetCode()), headers: map[string]string{}}
	for _, h := range ir.GetHeaders().GetSetHeaders() {
		r.headers[h.GetHeader().GetKey()] = string(h.GetHeader().GetRawValue())
	}
	var body struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(ir.GetBody(), &body); err != nil {
		t.Fatalf("immediate reply body %q: %v", ir.GetBody(), err)
	}
	r.code = body.Error.Code
	return r
}

// TestRequestBytesInFlight: a request's body is charged at its headers,
// against the replica's request bytes in flight and its principal's
// share of them, and refused there when it does not fit, so that Envoy
// never sends it: a principal at its share gets a 429 that invites a
// retry after a second, a body larger than the share a 429 that says
// retrying will not help, and a replica at its whole budget answers 503.
// Meanwhile another principal's small request is served.
func TestRequestBytesInFlight(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := newRig(t, nil, withRequestBytes(10*mib, 4*mib), withRegistry(reg))
	mb := func(n int) string { return strconv.Itoa(n * mib) }

	// Tenant a: 3 MiB of its 4 MiB share.
	held, resp := headersOnly(t, t.Context(), r, "a", mb(3))
	if rf := refusalOf(t, resp); rf != nil {
		t.Fatalf("a's first request: refused %+v, want its body asked for", rf)
	}
	for _, tc := range []struct {
		name, tenant, length string
		status               int
		code                 string
		headers              map[string]string
	}{
		{"a's second, past its share", "a", mb(2), 429, "rate_limit_exceeded", map[string]string{"retry-after": "1", "retry-after-ms": "1000"}},
		{"a body larger than a share", "b", mb(5), 429, "request_too_large", map[string]string{"x-should-retry": "false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, resp := headersOnly(t, t.Context(), r, tc.tenant, tc.length)
			rf := refusalOf(t, resp)
			if rf == nil || rf.status != tc.status || rf.code != tc.code {
				t.Fatalf("got %+v, want %d %s", rf, tc.status, tc.code)
			}
			for k, v := range tc.headers {
				if rf.headers[k] != v {
					t.Errorf("%s: got %q, want %q", k, rf.headers[k], v)
				}
			}
			if _, ok := rf.headers["retry-after"]; ok && tc.headers["retry-after"] == "" {
				t.Errorf("retry-after %q on a refusal that retrying cannot help", rf.headers["retry-after"])
			}
		})
	}

	// Another tenant's small request is served whole meanwhile.
	wantStatus(t, r.envoy.Do(t.Context(), chatRequest("b", waitBody), jsonUpstream(200, fixture(t, "openai/chat_response.json"))), 200)

	// Tenants c and d take the replica to 9 of its 10 MiB; e's 2 MiB do
	// not fit: 503.
	for _, tenant := range []string{"c", "d"} {
		if _, resp := headersOnly(t, t.Context(), r, tenant, mb(3)); refusalOf(t, resp) != nil {
			t.Fatalf("%s: refused %+v", tenant, refusalOf(t, resp))
		}
	}
	_, resp = headersOnly(t, t.Context(), r, "e", mb(2))
	if rf := refusalOf(t, resp); rf == nil || rf.status != 503 || rf.code != "overloaded" || rf.headers["retry-after"] != "1" {
		t.Fatalf("e, past the replica's budget: got %+v, want 503 overloaded with retry-after 1", rf)
	}
	if got := gathered(t, reg, "tokenwarden_request_bytes_in_flight"); got != 9*mib {
		t.Errorf("request bytes in flight: got %v, want %d", got, 9*mib)
	}

	// a's body arrives and is decided: its charge is given back once
	// the reply is sent, and a may send 4 MiB again.
	head, tail := `{"model":"gpt-4o-mini","max_tokens":10,"messages":[{"role":"user","content":"`, `"}]}`
	body := []byte(head + strings.Repeat("x", 3*mib-len(head)-len(tail)) + tail)
	if err := held.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := held.Recv(); err != nil || refusalOf(t, resp) != nil {
		t.Fatalf("a's body: got %v, %v; want it released", resp, err)
	}
	awaitGathered(t, reg, "tokenwarden_request_bytes_in_flight", 6*mib)
	if _, resp := headersOnly(t, t.Context(), r, "a", mb(4)); refusalOf(t, resp) != nil {
		t.Errorf("a after its body was decided: refused %+v", refusalOf(t, resp))
	}

	for outcome, want := range map[string]float64{"bytes_rejected": 2, "bytes_unavailable": 1} {
		if got := requestsTotal(t, reg, outcome); got != want {
			t.Errorf("requests_total{%s}: got %v, want %v", outcome, got, want)
		}
	}
	for reason, want := range map[string]float64{"per_principal": 1, "too_large": 1, "in_flight": 1} {
		if got := gathered(t, reg, "tokenwarden_request_bytes_refused_total", reason); got != want {
			t.Errorf("request_bytes_refused_total{%s}: got %v, want %v", reason, got, want)
		}
	}
}

// awaitGathered waits until a gauge of reg reads want: the server updates
// it after its reply has gone, which the client may see first.
func awaitGathered(t *testing.T, reg *prometheus.Registry, name string, want float64) {
	t.Helper()
	for got := gathered(t, reg, name); got != want; got = gathered(t, reg, name) {
		if t.Context().Err() != nil {
			t.Fatalf("%s: got %v, want %v", name, got, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRequestBytesHeldWhileWaiting: a request that a limit's wait_up_to
// holds keeps its body's charge while it waits, and gives it back when
// it is decided; a stream that ends gives back what it held.
func TestRequestBytesHeldWhileWaiting(t *testing.T) {
	frozen := time.Unix(1_000_000, int64(time.Millisecond))
	store := memstore.New(memstore.Options{Now: func() time.Time { return frozen }})
	reg := prometheus.NewRegistry()
	r := newRig(t, []accounting.Limit{waitingLimit(10*time.Second, 10*time.Second)}, withStore(store), withRegistry(reg),
		withRequestBytes(10*mib, 4*mib))
	wantStatus(t, r.envoy.Do(t.Context(), chatRequest("a", waitBody), jsonUpstream(200, fixture(t, "openai/chat_response.json"))), 200)
	r.envoy.Wait()
	if got := gathered(t, reg, "tokenwarden_request_bytes_in_flight"); got != 0 {
		t.Fatalf("request bytes in flight after a whole request: got %v, want 0", got)
	}

	ctx, leave := context.WithCancel(t.Context())
	stream, _ := headersOnly(t, ctx, r, "a", strconv.Itoa(len(waitBody)))
	if err := stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: waitBody, EndOfStream: true}}}); err != nil {
		t.Fatal(err)
	}
	if held, err := stream.Recv(); err != nil || held.GetOverrideMessageTimeout() == nil {
		t.Fatalf("reply to the body: got %v, %v; want the request held", held, err)
	}
	if got := gathered(t, reg, "tokenwarden_request_bytes_in_flight"); got != float64(len(waitBody)) {
		t.Errorf("request bytes in flight while the request waits: got %v, want its %d", got, len(waitBody))
	}
	// The client leaves while its request is held: the charge goes with
	// the stream.
	leave()
	r.envoy.Wait()
	if got := gathered(t, reg, "tokenwarden_request_bytes_in_flight"); got != 0 {
		t.Errorf("request bytes in flight after the held request's client left: got %v, want 0", got)
	}
}

// TestRequestBytesLimits: the bounds default to the memory the process is
// given and a quarter of that for a principal; without principal
// attributes there is no share to keep; a reload changes them.
func TestRequestBytesLimits(t *testing.T) {
	lim, err := accounting.New(accounting.Options{Store: memstore.New(memstore.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	opts := extproc.Options{Limiter: lim, Identity: tenantIdentity}
	srv, err := extproc.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	wantInFlight, wantShare, _, _ := extproc.DefaultRequestBytes()
	if in, share := srv.RequestBytesLimits(); in != wantInFlight || share != wantShare || share != in/4 {
		t.Errorf("defaults: got %d and %d, want %d and %d", in, share, wantInFlight, wantShare)
	}
	for _, tc := range []struct {
		name                 string
		rb                   extproc.RequestBytes
		identity             extproc.Identity
		wantIn, wantPerPrinc int64
	}{
		{"both set", extproc.RequestBytes{InFlight: 100 * mib, PerPrincipal: 30 * mib}, tenantIdentity, 100 * mib, 30 * mib},
		{"the share defaults to a quarter", extproc.RequestBytes{InFlight: 100 * mib}, tenantIdentity, 100 * mib, 25 * mib},
		{"no principal: no share kept", extproc.RequestBytes{InFlight: 100 * mib, PerPrincipal: 30 * mib},
			extproc.Identity{Attributes: tenantIdentity.Attributes}, 100 * mib, 100 * mib},
		{"a principal named, not required", extproc.RequestBytes{InFlight: 100 * mib, Principal: []string{"user"}},
			extproc.Identity{Attributes: tenantIdentity.Attributes}, 100 * mib, 25 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := opts
			next.RequestBytes, next.Identity = tc.rb, tc.identity
			if err := srv.Reload(next); err != nil {
				t.Fatal(err)
			}
			if in, share := srv.RequestBytesLimits(); in != tc.wantIn || share != tc.wantPerPrinc {
				t.Errorf("after a reload: got %d and %d, want %d and %d", in, share, tc.wantIn, tc.wantPerPrinc)
			}
		})
	}
}
