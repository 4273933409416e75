package envoy

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// e2eFormatCost is a micro-dollar amount as tokenwarden writes it (USD,
// six decimals).
func e2eFormatCost(micros int64) string { return fmt.Sprintf("%d.%06d", micros/1e6, micros%1e6) }

// e2eReadContent reads an SSE stream until n content chunks have arrived.
func e2eReadContent(t *testing.T, body io.Reader, n int) {
	t.Helper()
	br := bufio.NewReader(body)
	for got := 0; got < n; {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream after %d content chunks: %v", got, err)
		}
		if e2eContentChunk(line) {
			got++
		}
	}
}

// checkRecord checks tokenwarden's settlement record of the request an
// access log line describes: found by the line's request_id (Envoy's
// x-request-id), of the line's reservation, on basis, with its tokens
// and its cost at e2eConfig's price. When the access log carries the
// settlement (full: the response ended normally), its figures are the
// record's; when it cannot (a cut stream, a client gone), they are null,
// and the record alone has them. It returns the record.
func (r *e2eRig) checkRecord(t *testing.T, line map[string]any, basis string, full bool) map[string]any {
	t.Helper()
	id, _ := line["request_id"].(string)
	rec := r.awaitRecord(t, id, 5*time.Second)
	if rec["level"] != "INFO" || rec["reservation"] != line["tw_reservation"] || rec["basis"] != basis {
		t.Errorf("record: got level %v, reservation %v, basis %v; want INFO, the access log's %v, %s (record %v)",
			rec["level"], rec["reservation"], rec["basis"], line["tw_reservation"], basis, rec)
	}
	in, _ := rec["actual_input_tokens"].(float64)
	out, _ := rec["actual_output_tokens"].(float64)
	if rec["actual_tokens"] != in+out {
		t.Errorf("record: actual_tokens %v, want input %v + output %v", rec["actual_tokens"], in, out)
	}
	if want := e2eFormatCost(e2eCostMicros(int64(in), int64(out))); rec["settled_cost"] != want {
		t.Errorf("record: settled_cost %v, want %s for %v input and %v output tokens", rec["settled_cost"], want, in, out)
	}
	if full {
		for k, want := range map[string]any{"tw_settled_on": basis, "tw_actual_tokens": rec["actual_tokens"], "tw_settled_cost": rec["settled_cost"]} {
			if line[k] != want {
				t.Errorf("access log %s: got %v, want the record's %v", k, line[k], want)
			}
		}
	} else {
		// Measured: Envoy writes the line before tokenwarden learns the
		// stream has ended (see docs/operations.md).
		for _, k := range []string{"tw_settled_on", "tw_actual_tokens", "tw_settled_cost"} {
			if line[k] != nil {
				t.Errorf("access log %s: got %v, want null: the docs say a cut request's settlement is in the record only", k, line[k])
			}
		}
	}
	return rec
}

// TestE2EReconciliationRecord: through the real Envoy, every ending of an
// admitted request leaves one settlement record in tokenwarden's log,
// keyed by the access log's request_id, with the basis, the actual tokens
// and the settled cost: whole (JSON and streamed), cut by the upstream,
// the client gone before and after the response headers, an upstream
// 5xx, Envoy's own replies (a route timeout, an upstream never reached),
// a request held by a wait, and a downgraded one. Where the response
// ended normally the access log carries the same figures; where it was
// cut it cannot, and the record is the only complete one.
func TestE2EReconciliationRecord(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	chunks := []string{"x-fakellm-chunks", "10", "x-fakellm-output-tokens", "40"}
	cases := []struct {
		name  string
		tier  string
		basis string
		full  bool
		// call sends the request whose record is checked, tagged tag.
		call func(t *testing.T, c e2eCaller, tag string)
		// check checks more of the record.
		check func(t *testing.T, rec, line map[string]any)
	}{
		{name: "whole JSON", basis: "usage", full: true,
			call: func(t *testing.T, c e2eCaller, tag string) {
				e2eWantStatus(t, r.mustSend(t, c, e2eChat(t, "hi", 100, false), tag, e2eFixedUsage...), http.StatusOK)
			},
			check: func(t *testing.T, rec, _ map[string]any) {
				if rec["actual_input_tokens"] != float64(e2eInput) || rec["actual_output_tokens"] != float64(e2eOutput) {
					t.Errorf("record: %v in, %v out; want fakellm's %d and %d", rec["actual_input_tokens"], rec["actual_output_tokens"], e2eInput, e2eOutput)
				}
			}},
		{name: "whole stream", basis: "usage", full: true,
			call: func(t *testing.T, c e2eCaller, tag string) {
				e2eWantStatus(t, r.mustSend(t, c, e2eChat(t, "hi", 100, true), tag, e2eFixedUsage...), http.StatusOK)
			}},
		{name: "cut by the upstream", basis: "estimate",
			call: func(t *testing.T, c e2eCaller, tag string) {
				resp, err := r.open(t, t.Context(), c, e2eChat(t, "Count.", 1000, true), tag,
					append([]string{"x-fakellm-cut-after", "2", "x-fakellm-chunk-delay", "50ms"}, chunks...)...)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if rest, err := io.ReadAll(resp.Body); err == nil || strings.Contains(string(rest), "[DONE]") {
					t.Fatalf("got a whole stream (err %v), want the upstream's cut", err)
				}
			},
			check: func(t *testing.T, _, line map[string]any) {
				if flags, _ := line["flags"].(string); !strings.Contains(flags, "UPE") && !strings.Contains(flags, "UR") {
					t.Errorf("access log flags %v, want UPE or UR", line["flags"])
				}
			}},
		{name: "client gone after the response headers", basis: "estimate",
			call: func(t *testing.T, c e2eCaller, tag string) {
				resp, err := r.open(t, t.Context(), c, e2eChat(t, "Count.", 1000, true), tag,
					append([]string{"x-fakellm-chunk-delay", "150ms"}, chunks...)...)
				if err != nil {
					t.Fatal(err)
				}
				e2eReadContent(t, resp.Body, 2)
				resp.Body.Close()
			}},
		{name: "client gone before the response headers", basis: "reserved",
			call: func(t *testing.T, c e2eCaller, tag string) {
				ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
				defer cancel()
				if resp, err := r.open(t, ctx, c, e2eChat(t, "Count.", 1000, false), tag, "x-fakellm-chunk-delay", "3s"); err == nil {
					resp.Body.Close()
					t.Fatalf("got a response (%d) before fakellm's delay, want the client's timeout", resp.StatusCode)
				}
			},
			check: func(t *testing.T, rec, line map[string]any) {
				if rec["actual_tokens"] != line["tw_estimate_tokens"] {
					t.Errorf("record: actual_tokens %v, want the whole estimate %v", rec["actual_tokens"], line["tw_estimate_tokens"])
				}
			}},
		{name: "upstream 5xx", basis: "refused", full: true,
			call: func(t *testing.T, c e2eCaller, tag string) {
				e2eWantStatus(t, r.mustSend(t, c, e2eChat(t, "hi", 100, false), tag, "x-fakellm-status", "500"), http.StatusInternalServerError)
			}},
		{name: "Envoy's route timeout", basis: "reserved", full: true,
			call: func(t *testing.T, c e2eCaller, tag string) {
				resp := r.mustSend(t, c, e2eChat(t, "hi", 100, false), tag, append([]string{"x-fakellm-chunk-delay", "3s"}, e2eRouteTimeout1s...)...)
				e2eWantStatus(t, resp, http.StatusGatewayTimeout)
			}},
		{name: "Envoy's reply for an upstream never reached", basis: "refused", full: true,
			call: func(t *testing.T, c e2eCaller, tag string) {
				e2eWantStatus(t, r.mustSend(t, c, e2eChat(t, "hi", 100, false), tag, e2eRouteUnreachable...), http.StatusServiceUnavailable)
			}},
		{name: "admitted after a wait", tier: "wait", basis: "usage", full: true,
			call: func(t *testing.T, c e2eCaller, tag string) {
				// e2e-wait's window takes three; the fourth waits for the
				// next.
				startOfWaitWindow()
				for range e2eWaitCapacity {
					e2eWantStatus(t, r.mustSend(t, c, e2eChat(t, "hi", 10, false), ""), http.StatusOK)
				}
				e2eWantStatus(t, r.mustSend(t, c, e2eChat(t, "hi", 10, false), tag, e2eFixedUsage...), http.StatusOK)
			},
			check: func(t *testing.T, rec, line map[string]any) {
				if w, _ := rec["wait_seconds"].(float64); w <= 0 || line["tw_wait_seconds"] != rec["wait_seconds"] {
					t.Errorf("record: wait_seconds %v, want the access log's %v, above zero", rec["wait_seconds"], line["tw_wait_seconds"])
				}
			}},
		{name: "downgraded", tier: "degrade", basis: "usage", full: true,
			call: func(t *testing.T, c e2eCaller, tag string) {
				body := []byte(`{"model":"gpt-4o","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`)
				e2eWantStatus(t, r.mustSend(t, c, body, ""), http.StatusOK) // e2e-degrade-4o's one
				e2eWantStatus(t, r.mustSend(t, c, body, tag, e2eFixedUsage...), http.StatusOK)
			},
			check: func(t *testing.T, rec, _ map[string]any) {
				if rec["model"] != "gpt-4o-mini" || rec["downgraded_from"] != "gpt-4o" {
					t.Errorf("record: model %v downgraded from %v, want gpt-4o-mini from gpt-4o", rec["model"], rec["downgraded_from"])
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newE2ECaller(t, cmp.Or(tc.tier, "standard"))
			tag := c.tenant + "-rec"
			tc.call(t, c, tag)
			line := accessLogLine(t, r.envoy.stdout, tag)
			rec := r.checkRecord(t, line, tc.basis, tc.full)
			if tc.check != nil {
				tc.check(t, rec, line)
			}
			// One record per request: by now any other would be there.
			n := 0
			for _, other := range r.tokenwarden().logLines("settled") {
				if other["request_id"] == line["request_id"] {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d settlement records of request %v, want one", n, line["request_id"])
			}
		})
	}
}

// TestE2EResetBeforeBody: an upstream that sends a stream's response
// headers (and its first, empty, chunk) and resets. When the reset comes
// while tokenwarden holds the headers, Envoy answers 502 itself, and
// tokenwarden has seen the upstream begin to answer and none of the
// body, which shows nothing of what was generated: the request settles
// on the whole reservation, as one reset before its headers does
// (TestE2EEnvoyOwnErrors). (When tokenwarden's reply wins the race, the
// client gets the 200 and the reset, and tokenwarden may have seen the
// first chunk: such an attempt settles on what it saw, and is only
// logged here.) Attempts repeat until one has met Envoy's 502.
func TestE2EResetBeforeBody(t *testing.T) {
	t.Parallel()
	r := e2e(t)
	const attempts = 10
	var statuses []int
	for i := 0; i < attempts && !slices.Contains(statuses, http.StatusBadGateway); i++ {
		c := newE2ECaller(t)
		tag := fmt.Sprintf("%s-reset%d", c.tenant, i)
		resp, err := r.open(t, t.Context(), c, e2eChat(t, "Count.", 1000, true), tag, "x-fakellm-cut-after", "0")
		if err != nil {
			t.Fatal(err)
		}
		// A 200's body ends in the reset: an error is what is expected.
		io.ReadAll(resp.Body)
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
		line := accessLogLine(t, r.envoy.stdout, tag)
		if resp.StatusCode != http.StatusBadGateway {
			t.Logf("attempt %d: the client got %d; tokenwarden settled on %v", i, resp.StatusCode, r.awaitRecord(t, line["request_id"].(string), 5*time.Second)["basis"])
			continue
		}
		if flags, _ := line["flags"].(string); !strings.Contains(flags, "UPE") && !strings.Contains(flags, "UR") {
			t.Errorf("access log flags %v, want UPE or UR", line["flags"])
		}
		rec := r.checkRecord(t, line, "reserved", false)
		if rec["actual_tokens"] != line["tw_estimate_tokens"] {
			t.Errorf("record: actual_tokens %v, want the whole estimate %v", rec["actual_tokens"], line["tw_estimate_tokens"])
		}
	}
	if !slices.Contains(statuses, http.StatusBadGateway) {
		t.Errorf("no attempt of %d met Envoy's 502 (statuses %v): the case is not exercised", attempts, statuses)
	}
}
