package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// kind is one shape of request in the mix.
type kind int

const (
	openaiStream    kind = iota // chat completion, streamed (SSE)
	openaiJSON                  // chat completion, one JSON body
	anthropicStream             // messages, streamed
	clientCancel                // an OpenAI stream the client abandons after its first chunk
	upstreamError               // the upstream answers 500 or 503
	numKinds
)

// mix is each kind's share of the traffic, in percent.
var mix = [numKinds]int{openaiStream: 40, openaiJSON: 25, anthropicStream: 22, clientCancel: 10, upstreamError: 3}

// mixText describes the mix for the report.
const mixText = "40% OpenAI chat streamed, 25% OpenAI chat JSON, 22% Anthropic messages streamed, " +
	"10% OpenAI streams the client cancels after the first chunk, 3% upstream 500/503"

// class is how a response ended, as the table counts it.
type class int

const (
	classOK        class = iota // 200, body read to the end
	classLimited                // 429 from tokenwarden
	class5xx                    // the 5xx the upstream was asked for
	classCancelled              // a stream the client cancelled, as planned
	classOther                  // anything else: a transport error, an unplanned status
	numClasses
)

// prompt is a user message of about 400 bytes (100 tokens).
const prompt = "Summarise the registration call flow of a 5G core network in five steps, naming the network " +
	"function and the service operation used at each step, and say which clause of TS 23.502 describes it. " +
	"Keep each step to one sentence. If a step involves the AUSF or the UDM, say which of them holds the " +
	"subscriber's credentials, and why the AMF never sees them. Finish with one sentence on what changes for a " +
	"roaming subscriber."

var (
	openaiStreamBody = []byte(`{"model":"gpt-4o-mini","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"` + prompt + `"}]}`)
	openaiJSONBody   = []byte(`{"model":"gpt-4o-mini","max_tokens":64,"messages":[{"role":"user","content":"` + prompt + `"}]}`)
	anthropicBody    = []byte(`{"model":"claude-sonnet-4-5","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"` + prompt + `"}]}`)
)

// caller is one tenant's user, with its token.
type caller struct {
	tenant string
	token  string
}

// callers are the identities the traffic comes from: for each tenant,
// usersPerTenant users. The first hotTenants tenants have tier "hot".
type callers struct {
	hot, rest []caller
}

const usersPerTenant = 3

// hotShare is the hot tenants' share of the requests, in percent.
const hotShare = 20

func newCallers(p *jwtProvider, tenants int) (*callers, error) {
	c := &callers{}
	for i := range tenants {
		tier := "standard"
		if i < hotTenants {
			tier = "hot"
		}
		tenant := fmt.Sprintf("tenant-%03d", i)
		for u := range usersPerTenant {
			tok, err := p.sign(map[string]string{"tenant": tenant, "tier": tier, "sub": fmt.Sprintf("user-%d", u)})
			if err != nil {
				return nil, err
			}
			if i < hotTenants {
				c.hot = append(c.hot, caller{tenant, tok})
			} else {
				c.rest = append(c.rest, caller{tenant, tok})
			}
		}
	}
	return c, nil
}

// pick draws a caller: hotShare percent of the time a hot one.
func (c *callers) pick() caller {
	if rand.IntN(100) < hotShare {
		return c.hot[rand.IntN(len(c.hot))]
	}
	return c.rest[rand.IntN(len(c.rest))]
}

// pickKind draws a kind of request by the mix.
func pickKind() kind {
	n := rand.IntN(100)
	for k := range numKinds {
		if n < mix[k] {
			return k
		}
		n -= mix[k]
	}
	return openaiStream
}

// client sends the soak's requests to Envoy's listener.
type client struct {
	http *http.Client
	base string // http://host:port
}

func newClient(listen string) *client {
	tr := &http.Transport{
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     90 * time.Second,
		// The upstream answers uncompressed; Go's transparent gzip
		// would only add a header.
		DisableCompression: true,
	}
	return &client{http: &http.Client{Transport: tr}, base: "http://" + listen}
}

// requestTimeout bounds one request: far above any latency the soak
// expects, so that a request that hangs counts as "other" rather than
// holding a slot forever.
const requestTimeout = 30 * time.Second

// do sends one request of kind k as c and reads its response to the end
// (or, for clientCancel, to its first content chunk). It returns how the
// response ended and how long it took.
func (cl *client) do(ctx context.Context, k kind, c caller) (class, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	path, body := "/v1/chat/completions", openaiStreamBody
	h := http.Header{}
	h.Set("content-type", "application/json")
	h.Set("authorization", "Bearer "+c.token)
	h.Set("x-fakellm-output-tokens", "32")
	h.Set("x-fakellm-chunks", "8")
	h.Set("x-fakellm-chunk-delay", "2ms")
	wantStatus := http.StatusOK
	switch k {
	case openaiJSON:
		body = openaiJSONBody
		h.Set("x-fakellm-chunk-delay", "10ms")
	case anthropicStream:
		path, body = "/v1/messages", anthropicBody
		h.Del("authorization")
		h.Set("x-api-key", c.token)
		h.Set("anthropic-version", "2023-06-01")
	case clientCancel:
		h.Set("x-fakellm-chunks", "20")
		h.Set("x-fakellm-chunk-delay", "20ms")
	case upstreamError:
		body = openaiJSONBody
		wantStatus = http.StatusInternalServerError
		if rand.IntN(2) == 0 {
			wantStatus = http.StatusServiceUnavailable
		}
		h.Set("x-fakellm-status", strconv.Itoa(wantStatus))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cl.base+path, bytes.NewReader(body))
	if err != nil {
		return classOther, 0, err
	}
	req.Header = h
	start := time.Now()
	resp, err := cl.http.Do(req)
	if err != nil {
		return classOther, time.Since(start), err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		_, err = io.Copy(io.Discard, resp.Body)
		return classLimited, time.Since(start), err
	case k == upstreamError && resp.StatusCode == wantStatus && resp.Header.Get("x-envoy-upstream-service-time") != "":
		// The upstream's own error (the router's header says the
		// upstream answered), not a 503 of tokenwarden's.
		_, err = io.Copy(io.Discard, resp.Body)
		return class5xx, time.Since(start), err
	case resp.StatusCode != http.StatusOK:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return classOther, time.Since(start), &statusError{what: kindName(k) + " " + path, status: resp.StatusCode, body: strings.TrimSpace(string(b))}
	case k == clientCancel:
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				// The first chunk is here: the client goes away,
				// mid-stream, without a word.
				cancel()
				return classCancelled, time.Since(start), nil
			}
		}
		return classOther, time.Since(start), errors.New("cancel: the stream ended before its first chunk")
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return classOther, time.Since(start), err
	}
	return classOK, time.Since(start), nil
}

// statusError is a response with a status the request did not plan for.
type statusError struct {
	what   string // the kind and path
	status int
	body   string // its start
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s: status %d: %s", e.what, e.status, e.body)
}

// cause sums up why a request ended otherwise than planned, for the
// report's count by cause: the status (with tokenwarden's error code when
// the body has one) or the kind of transport error.
func cause(err error) string {
	var se *statusError
	switch {
	case errors.As(err, &se):
		for _, code := range []string{"limiter_unavailable", "rate limiter is unavailable"} {
			if strings.Contains(se.body, code) {
				return fmt.Sprintf("%d limiter unavailable (store)", se.status)
			}
		}
		return fmt.Sprintf("status %d", se.status)
	case errors.Is(err, errShed):
		return "not sent (client at its in-flight bound)"
	case errors.Is(err, context.DeadlineExceeded):
		return "client timeout"
	case err == nil:
		return "unknown"
	}
	return "transport error"
}

func kindName(k kind) string {
	return [...]string{"openai stream", "openai json", "anthropic stream", "cancel", "upstream error"}[k]
}
