package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// outcome is what one lifecycle came to.
type outcome struct {
	// status is 200 for a request the server let through, the immediate
	// response's status for one it answered itself, 0 after an error.
	status int
	// decision is the time from sending the request body to its reply:
	// the estimate and the reservation, store round trip included, as
	// Envoy waits for them. total is the whole lifecycle.
	decision, total time.Duration
	err             error
}

// lifecycle plays one HTTP request's ext_proc stream the way Envoy does
// with tokenwarden's documented filter config: request headers, the
// buffered body, response headers, then the response body chunks sent
// pipelined — all of them before the first reply is read, which their
// replies (empty body responses, a few bytes each) cannot block, being
// far within HTTP/2's flow-control window. It half-closes the stream
// and waits for the server's handler to return, so a lifecycle's cost
// includes the server's settlement. tenant picks the request headers.
func lifecycle(ctx context.Context, client extprocv3.ExternalProcessorClient, t *traffic, tenant int) (o outcome) {
	start := time.Now()
	defer func() { o.total = time.Since(start) }()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := client.Process(ctx)
	if err != nil {
		return outcome{err: fmt.Errorf("opening stream: %w", err)}
	}
	// exchange sends m and reads its reply; done reports the end of the
	// lifecycle (an immediate response, or an error).
	exchange := func(m *extprocv3.ProcessingRequest, kind string) (done bool) {
		if err := s.Send(m); err != nil {
			o = outcome{err: fmt.Errorf("sending %s: %w", kind, err)}
			return true
		}
		return o.reply(s, kind)
	}
	if exchange(t.headers[tenant%len(t.headers)], "request_headers") {
		return o
	}
	sent := time.Now()
	done := exchange(t.body, "request_body")
	o.decision = time.Since(sent)
	if done || exchange(t.response, "response_headers") {
		return o
	}
	for _, c := range t.chunks {
		if err := s.Send(c); err != nil {
			return outcome{err: fmt.Errorf("sending response_body: %w", err)}
		}
	}
	for range t.chunks {
		if o.reply(s, "response_body") {
			return o
		}
	}
	o.status = 200
	_ = s.CloseSend()
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		return outcome{err: fmt.Errorf("awaiting the end of the stream: got %v, want EOF", err)}
	}
	return o
}

// reply reads the reply to a message of kind and reports whether it
// ended the lifecycle: an immediate response (o.status is its status)
// or an error (o.err).
func (o *outcome) reply(s extprocv3.ExternalProcessor_ProcessClient, kind string) (done bool) {
	r, err := s.Recv()
	if err != nil {
		o.err = fmt.Errorf("awaiting a %s reply: %w", kind, err)
		return true
	}
	if ir := r.GetImmediateResponse(); ir != nil {
		o.status = int(ir.GetStatus().GetCode())
		_ = s.CloseSend()
		return true
	}
	if !envoytest.IsReplyTo(kind, r) {
		o.err = fmt.Errorf("got a %T reply, want a %s reply", r.Response, kind)
		return true
	}
	return false
}
