package extproc_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc"
)

// records is a slog handler that keeps the "settled" records' attributes.
type records struct {
	mu   sync.Mutex
	recs []map[string]slog.Value
	lvls []slog.Level
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }

func (h *records) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "settled" {
		return nil
	}
	m := map[string]slog.Value{}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, m)
	h.lvls = append(h.lvls, r.Level)
	return nil
}

func (h *records) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *records) WithGroup(string) slog.Handler      { return h }

// TestSettlementRecord: each settlement is logged once, at info, keyed by
// Envoy's x-request-id (cut to 128 bytes), with the basis, the actual
// tokens and the settled cost at the model's price; a response that ends
// normally carries the same cost to Envoy's access log as settled_cost.
func TestSettlementRecord(t *testing.T) {
	h := &records{}
	r := newRig(t, []accounting.Limit{tokensLimit("tenant-tokens", 100000, "tenant")},
		withServer(func(o *extproc.Options) { o.Logger = slog.New(h) }))
	for _, id := range []string{"0f3c-request", strings.Repeat("x", 300)} {
		req := chatRequest("a", fixture(t, "openai/chat_request.json"))
		req.Headers = append(req.Headers, [2]string{"x-request-id", id})
		resp := r.envoy.Do(t.Context(), req, jsonUpstream(200, fixture(t, "openai/chat_response.json")))
		wantStatus(t, resp, 200)
		r.envoy.Wait()

		h.mu.Lock()
		recs, lvls := h.recs, h.lvls
		h.recs, h.lvls = nil, nil
		h.mu.Unlock()
		if len(recs) != 1 || lvls[0] != slog.LevelInfo {
			t.Fatalf("got %d settled records at %v, want one at info", len(recs), lvls)
		}
		rec := recs[0]
		// 93 input tokens at $0.15/M, 1024 cached at $0.075/M and 46
		// output at $0.60/M: 118.35 micro-dollars, rounded up.
		for k, want := range map[string]string{
			"request_id": id[:min(len(id), 128)], "basis": "usage", "model": "gpt-4o-mini", "status": "200",
			"actual_input_tokens": "1117", "actual_output_tokens": "46", "actual_tokens": "1163", "settled_cost": "0.000119",
		} {
			if got := rec[k].String(); got != want {
				t.Errorf("record %s: got %q, want %q", k, got, want)
			}
		}
		if md := resp.Metadata[extproc.MetadataNamespace]; md[extproc.MetaSettledCost] != "0.000119" {
			t.Errorf("metadata %s: got %v, want the record's 0.000119", extproc.MetaSettledCost, md[extproc.MetaSettledCost])
		}
	}
}
