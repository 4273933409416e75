package envoy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	extprocsvc "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"
)

// This file runs envoy.yaml in a real Envoy, with a stub ext_proc server in
// tokenwarden's place and a recording HTTP server in fakellm's, to pin what the
// config promises at run time: identity comes only from the verified JWT, large
// bodies reach tokenwarden whole, metadata flows both ways. The stub always
// answers "continue"; tokenwarden's own behaviour is for the end-to-end tests.

// exchange is what the stub ext_proc server saw of one HTTP request.
type exchange struct {
	headers  map[string][]string         // request headers, as sent to ext_proc
	metadata map[string]*structpb.Struct // metadata_context.filter_metadata
	bodyLen  int                         // bytes of request body received
	bodyMsgs int                         // request_body messages received
	bodyEOS  bool                        // the last one had end_of_stream
	kinds    []string                    // message kinds, in order
	// grpcMetadata is the ext_proc stream's own gRPC metadata.
	grpcMetadata metadata.MD
}

// stubProcessor answers every ext_proc message with "continue unchanged", and
// tags the response headers reply with tokenwarden-style dynamic metadata.
type stubProcessor struct {
	extprocsvc.UnimplementedExternalProcessorServer
	mu   sync.Mutex
	seen []*exchange
}

// stubMetadata is what the stub writes under namespace "tokenwarden".
var stubMetadata = map[string]any{"estimate_tokens": 4242, "actual_tokens": 17, "limit": "tenant-tpm"}

// Process implements the ext_proc stream.
func (s *stubProcessor) Process(stream extprocsvc.ExternalProcessor_ProcessServer) error {
	ex := &exchange{headers: map[string][]string{}}
	ex.grpcMetadata, _ = metadata.FromIncomingContext(stream.Context())
	s.mu.Lock()
	s.seen = append(s.seen, ex)
	s.mu.Unlock()
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil // Envoy closed or reset the stream: the request is over
		}
		resp := &extprocsvc.ProcessingResponse{}
		s.mu.Lock()
		ex.kinds = append(ex.kinds, fmt.Sprintf("%T", req.GetRequest()))
		switch m := req.GetRequest().(type) {
		case *extprocsvc.ProcessingRequest_RequestHeaders:
			for _, h := range m.RequestHeaders.GetHeaders().GetHeaders() {
				ex.headers[h.GetKey()] = append(ex.headers[h.GetKey()], string(h.GetRawValue()))
			}
			ex.metadata = req.GetMetadataContext().GetFilterMetadata()
			resp.Response = &extprocsvc.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocsvc.HeadersResponse{}}
		case *extprocsvc.ProcessingRequest_RequestBody:
			ex.bodyLen += len(m.RequestBody.GetBody())
			ex.bodyMsgs++
			ex.bodyEOS = m.RequestBody.GetEndOfStream()
			resp.Response = &extprocsvc.ProcessingResponse_RequestBody{RequestBody: &extprocsvc.BodyResponse{}}
		case *extprocsvc.ProcessingRequest_RequestTrailers:
			resp.Response = &extprocsvc.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocsvc.TrailersResponse{}}
		case *extprocsvc.ProcessingRequest_ResponseHeaders:
			md, err := structpb.NewStruct(map[string]any{twNamespace: stubMetadata})
			if err != nil {
				panic(err)
			}
			resp.DynamicMetadata = md
			resp.Response = &extprocsvc.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocsvc.HeadersResponse{}}
		case *extprocsvc.ProcessingRequest_ResponseBody:
			resp.Response = &extprocsvc.ProcessingResponse_ResponseBody{ResponseBody: &extprocsvc.BodyResponse{}}
		case *extprocsvc.ProcessingRequest_ResponseTrailers:
			resp.Response = &extprocsvc.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocsvc.TrailersResponse{}}
		}
		s.mu.Unlock()
		if err := stream.Send(resp); err != nil {
			return nil
		}
	}
}

// count returns how many ext_proc streams the stub has seen.
func (s *stubProcessor) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// last returns a copy of the latest exchange.
func (s *stubProcessor) last(t *testing.T) exchange {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) == 0 {
		t.Fatal("ext_proc server saw no request")
	}
	return *s.seen[len(s.seen)-1]
}

// upstreamRecorder is the fake LLM: it records the last request's headers and
// body size and answers a small JSON body.
type upstreamRecorder struct {
	mu      sync.Mutex
	headers http.Header
	bodyLen int
}

func (u *upstreamRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, _ := io.Copy(io.Discard, r.Body)
	u.mu.Lock()
	u.headers, u.bodyLen = r.Header.Clone(), int(n)
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"ok":true}`)
}

func (u *upstreamRecorder) last() (http.Header, int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.headers, u.bodyLen
}

// syncBuffer is a bytes.Buffer safe for Envoy's output goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startEnvoy runs Envoy on a rendered config until the test ends and returns its
// stdout (the access log) once the admin interface reports ready.
func startEnvoy(t *testing.T, a addrs, edits ...func(map[string]any)) *syncBuffer {
	t.Helper()
	bin := envoyBinary(t)
	cfg := writeTemp(t, "envoy.yaml", renderBootstrap(t, a, edits...))
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	// --disable-hot-restart: no shared-memory base id to collide with other
	// Envoys on the machine; a short flush interval so access log lines show up
	// within the test (the default is 10 s).
	cmd := exec.Command(bin, "-c", cfg, "--disable-hot-restart", "--concurrency", "1",
		"--log-level", "warn", "--file-flush-interval-msec", "50")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("envoy stderr:\n%s", stderr.String())
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			t.Fatalf("envoy exited early:\n%s", stderr.String())
		default:
		}
		resp, err := http.Get("http://" + a.admin + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return stdout
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("envoy not ready after 15s:\n%s", stderr.String())
	return nil
}

// chatBody is an OpenAI chat request of at least size bytes.
func chatBody(size int) []byte {
	const head, tail = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"`, `"}]}`
	pad := max(size-len(head)-len(tail), 1)
	return []byte(head + strings.Repeat("a", pad) + tail)
}

// post sends body to Envoy's listener with the given headers. A "tag" header, if
// given, goes into the query string instead, where the access log line of the
// request can be found by it (Envoy, as the edge, replaces x-request-id).
func post(t *testing.T, listen string, body []byte, headers map[string]string) (*http.Response, error) {
	t.Helper()
	target := "http://" + listen + "/v1/chat/completions"
	if tag, ok := headers["tag"]; ok {
		target += "?tag=" + tag
		delete(headers, "tag")
	}
	req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// accessLogLine waits for the access log line of the request post sent with tag
// and returns it decoded.
func accessLogLine(t *testing.T, log *syncBuffer, tag string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		sc := bufio.NewScanner(strings.NewReader(log.String()))
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			// The tag is the query's last parameter, alone or after others.
			if p := fmt.Sprint(line["path"]); strings.HasSuffix(p, "?tag="+tag) || strings.HasSuffix(p, "&tag="+tag) {
				return line
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no access log line for tag %s in:\n%s", tag, log.String())
	return nil
}

// stack is Envoy running envoy.yaml between a stub tokenwarden and a recording
// upstream.
type stack struct {
	proc      *stubProcessor
	upstream  *upstreamRecorder
	addrs     addrs
	accessLog *syncBuffer
}

// startStack starts the stub ext_proc server, the upstream and Envoy (on the
// shipped config changed by edits) for the rest of the test.
func startStack(t *testing.T, edits ...func(map[string]any)) *stack {
	t.Helper()
	if testing.Short() {
		t.Skip("starts Envoy")
	}
	envoyBinary(t) // skip (or fail in CI) before starting servers

	s := &stack{proc: &stubProcessor{}, upstream: &upstreamRecorder{}}
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(maxGRPCMessage))
	extprocsvc.RegisterExternalProcessorServer(gs, s.proc)
	healthpb.RegisterHealthServer(gs, health.NewServer())
	gln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(gln)
	t.Cleanup(gs.Stop)
	upstream := httptest.NewServer(s.upstream)
	t.Cleanup(upstream.Close)

	s.addrs = addrs{listen: freeAddr(t), admin: freeAddr(t), tokenwarden: gln.Addr().String(), upstream: upstream.Listener.Addr().String()}
	s.accessLog = startEnvoy(t, s.addrs, edits...)
	return s
}

// relaxMessageTimeout raises ext_proc's message_timeout in a rendered config.
// The shipped 1 s covers sending a 32 MiB body to tokenwarden over loopback,
// but not on a test machine whose two cores are busy with other test binaries
// (Envoy then answers 504): these tests check where bodies and headers go, not
// how fast, so they must not depend on the machine's load.
func relaxMessageTimeout(t *testing.T) func(map[string]any) {
	return func(doc map[string]any) {
		hcm := path(t, doc, "static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config")
		path(t, named(t, path(t, hcm, "http_filters"), extProcFilter), "typed_config").(map[string]any)["message_timeout"] = "30s"
	}
}

// TestEnvoyRunsBootstrap drives the shipped envoy.yaml through a real Envoy.
func TestEnvoyRunsBootstrap(t *testing.T) {
	st := startStack(t, relaxMessageTimeout(t))
	proc, up, a, accessLog := st.proc, st.upstream, st.addrs, st.accessLog
	acme := mintDemoToken(t, map[string]any{"tenant": "acme", "sub": "alice", "tier": "free"})

	t.Run("verified identity replaces forged headers", func(t *testing.T) {
		resp, err := post(t, a.listen, chatBody(100), map[string]string{
			"Authorization": "Bearer " + acme, "tag": "verified",
			"X-Tenant-Id": "evil", "X-User-Id": "mallory", "X-Tier": "enterprise", "X-Agent-Run-Id": "run-1",
			// The routing header of a downgrade is tokenwarden's to set:
			// a client's own must not choose the upstream.
			"X-Tokenwarden-Model": "gpt-4o-mini",
		})
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status: got %d, want 200", resp.StatusCode)
		}
		ex := proc.last(t)
		for h, want := range map[string]string{"x-tenant-id": "acme", "x-user-id": "alice", "x-tier": "free", "x-agent-run-id": "run-1"} {
			if got := ex.headers[h]; len(got) != 1 || got[0] != want {
				t.Errorf("ext_proc saw %s: got %q, want exactly [%q]", h, got, want)
			}
		}
		payload := ex.metadata[jwtNamespace].GetFields()[jwtPayloadKey].GetStructValue().AsMap()
		if payload["tenant"] != "acme" || payload["sub"] != "alice" {
			t.Errorf("ext_proc saw %s metadata %s: got %v, want the JWT payload (tenant acme, sub alice)", jwtNamespace, jwtPayloadKey, payload)
		}
		if got := ex.headers["x-tokenwarden-model"]; len(got) != 0 {
			t.Errorf("ext_proc saw the client's x-tokenwarden-model %q, want it stripped at the edge", got)
		}
		h, _ := up.last()
		for _, name := range append(identityHeaders, "x-tokenwarden-model") {
			if v := h.Get(name); v != "" {
				t.Errorf("upstream got %s: %q, want it removed before the provider", name, v)
			}
		}
		if v := h.Get("Authorization"); v != "Bearer "+acme {
			t.Errorf("upstream Authorization: got %q, want the forwarded token (forward: true)", v)
		}
		line := accessLogLine(t, accessLog, "verified")
		for k, want := range map[string]any{"tw_estimate_tokens": 4242.0, "tw_actual_tokens": 17.0, "tw_limit": "tenant-tpm", "tenant": "acme", "user": "alice"} {
			if line[k] != want {
				t.Errorf("access log %s: got %v, want %v (line %v)", k, line[k], want, line)
			}
		}
	})

	t.Run("no token, forged headers dropped", func(t *testing.T) {
		resp, err := post(t, a.listen, chatBody(100), map[string]string{"X-Tenant-Id": "evil", "X-User-Id": "mallory"})
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status: got %d, want 200 (the stub admits; tokenwarden would answer 401)", resp.StatusCode)
		}
		ex := proc.last(t)
		for _, h := range identityHeaders {
			if got, ok := ex.headers[h]; ok {
				t.Errorf("ext_proc saw %s: %q, want no such header without a verified token", h, got)
			}
		}
		if _, ok := ex.metadata[jwtNamespace]; ok {
			t.Errorf("ext_proc saw %s metadata without a token: %v", jwtNamespace, ex.metadata[jwtNamespace])
		}
	})

	t.Run("invalid tokens rejected before tokenwarden", func(t *testing.T) {
		forged := acme[:strings.LastIndexByte(acme, '.')] + ".AAAA"
		for name, hdr := range map[string]map[string]string{
			"garbage bearer":      {"Authorization": "Bearer not-a-jwt"},
			"bad signature":       {"Authorization": "Bearer " + forged},
			"bad x-api-key token": {"X-Api-Key": forged},
		} {
			before := proc.count()
			resp, err := post(t, a.listen, chatBody(100), hdr)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s: status got %d, want 401", name, resp.StatusCode)
			}
			// Envoy still runs jwt_authn's local reply through ext_proc's encoder
			// side: tokenwarden gets a stream that starts with response_headers and
			// must answer it without having admitted anything. What must not happen
			// is a request_headers message (an admission of an unverified caller).
			if proc.count() != before {
				for _, k := range proc.last(t).kinds {
					if strings.Contains(k, "RequestHeaders") || strings.Contains(k, "RequestBody") {
						t.Errorf("%s: ext_proc got %v, want no request messages", name, proc.last(t).kinds)
					}
				}
			}
		}
	})

	t.Run("32 MiB body reaches tokenwarden whole", func(t *testing.T) {
		body := chatBody(minBufferedBody + 1<<20)
		resp, err := post(t, a.listen, body, map[string]string{"Authorization": "Bearer " + acme})
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status: got %d, want 200", resp.StatusCode)
		}
		ex := proc.last(t)
		if ex.bodyLen != len(body) || ex.bodyMsgs != 1 || !ex.bodyEOS {
			t.Errorf("ext_proc body: got %d bytes in %d messages (end_of_stream %v), want %d bytes in 1 message with end_of_stream",
				ex.bodyLen, ex.bodyMsgs, ex.bodyEOS, len(body))
		}
		if _, n := up.last(); n != len(body) {
			t.Errorf("upstream body: got %d bytes, want %d", n, len(body))
		}
	})

	t.Run("body over the buffer limit gets 413", func(t *testing.T) {
		resp, err := post(t, a.listen, chatBody(maxGRPCMessage), map[string]string{"Authorization": "Bearer " + acme})
		var opErr *net.OpError
		switch {
		case err != nil && (errors.As(err, &opErr) || errors.Is(err, io.EOF)):
			// Envoy may answer and close before the client finished sending; the
			// 413 then races the client's write error. Either way nothing got in.
			t.Logf("client write failed after Envoy's reply: %v", err)
		case err != nil:
			t.Fatal(err)
		case resp.StatusCode != http.StatusRequestEntityTooLarge:
			t.Errorf("status: got %d, want 413", resp.StatusCode)
		}
		if _, n := up.last(); n >= maxGRPCMessage {
			t.Errorf("upstream got a %d-byte body, want it stopped at Envoy", n)
		}
	})
}

// TestHeaderSanitizerStandsAlone checks the header_mutation step strips forged
// identity headers by itself. Envoy 1.40's jwt_authn also strips the headers
// named in claim_to_headers, so with the shipped config the two overlap; this
// test removes claim_to_headers to see the first layer hold on its own (as it
// must for identity headers no claim sets, and on Envoys whose jwt_authn lets
// client copies through when the token is missing).
func TestHeaderSanitizerStandsAlone(t *testing.T) {
	st := startStack(t, relaxMessageTimeout(t), func(doc map[string]any) {
		hcm := path(t, doc, "static_resources", "listeners", 0, "filter_chains", 0, "filters", 0, "typed_config")
		jwt := named(t, path(t, hcm, "http_filters"), jwtFilter)
		for _, p := range path(t, jwt, "typed_config", "providers").(map[string]any) {
			delete(p.(map[string]any), "claim_to_headers")
		}
	})
	token := mintDemoToken(t, map[string]any{"tenant": "acme", "sub": "alice"})
	for name, auth := range map[string]string{"with token": "Bearer " + token, "without token": ""} {
		hdrs := map[string]string{"X-Tenant-Id": "evil", "X-User-Id": "mallory", "X-Tier": "enterprise"}
		if auth != "" {
			hdrs["Authorization"] = auth
		}
		resp, err := post(t, st.addrs.listen, chatBody(100), hdrs)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status got %d, want 200", name, resp.StatusCode)
		}
		ex := st.proc.last(t)
		for _, h := range identityHeaders {
			if got, ok := ex.headers[h]; ok {
				t.Errorf("%s: ext_proc saw %s: %q, want the client's copy stripped", name, h, got)
			}
		}
	}
}
