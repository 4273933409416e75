package extproc_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// tieredTPM is 12000 tokens an hour shared by all tenants, 30% of it
// kept for requests whose x-priority is interactive.
var tieredTPM = accounting.Limit{Name: "tiered-tpm", Dimension: accounting.Tokens, Algorithm: accounting.FixedWindow,
	Limit: 12000, Window: time.Hour,
	ReserveFor: &accounting.ReserveFor{Attribute: "priority", Value: "interactive", Share: 0.3}}

func withPriority(o *extproc.Options) {
	o.Identity.Attributes = append(o.Identity.Attributes, extproc.AttributeSource{Name: "priority", Header: "x-priority"})
}

func tierChat(tenant, priority string) envoytest.Request {
	req := chatRequest(tenant, contractChat) // reserves about 1010 tokens
	if priority != "" {
		req.Headers = append(req.Headers, [2]string{"x-priority", priority})
	}
	return req
}

// TestReserveForThroughEnvoy: batch and interactive requests from
// several tenants race through the filter for one shared limit. Batch
// traffic, asking for far more than the limit, is held to 70% of it;
// interactive requests asking for the remaining 30% all get through,
// even when batch has already taken all it could, and batch's 429s
// state the limit it was held to.
func TestReserveForThroughEnvoy(t *testing.T) {
	r := newRig(t, []accounting.Limit{tieredTPM}, withServer(withPriority))
	usage := jsonUpstream(200, []byte(`{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":1000,"total_tokens":1010}}`))
	// About 1010 tokens each: 3 interactive requests are 3030 tokens,
	// within the 3600 kept; 8 batch requests (8080) fit the 8400 left
	// to batch, a ninth does not.
	var batchOK, batch429, interactiveOK atomic.Int64
	var wg sync.WaitGroup
	// Interactive requests start once batch has met its first 429, and
	// race the batch requests still arriving: by then batch has taken
	// all it may, and without the reserve it would have taken all.
	refused := make(chan struct{})
	var once sync.Once
	for i := range 16 {
		wg.Go(func() {
			resp := r.envoy.Do(t.Context(), tierChat("t"+string(rune('a'+i%4)), "batch"), usage)
			switch {
			case resp.Err != nil:
				t.Error(resp.Err)
			case resp.Status == 200:
				batchOK.Add(1)
			case resp.Status == 429:
				batch429.Add(1)
				once.Do(func() { close(refused) })
				if got := resp.Header.Get("x-ratelimit-limit-tokens"); got != "8400" {
					t.Errorf("batch 429 states limit %s, want 8400", got)
				}
			default:
				t.Errorf("batch: status %d", resp.Status)
			}
		})
	}
	for range 3 {
		wg.Go(func() {
			<-refused
			resp := r.envoy.Do(t.Context(), tierChat("ta", "interactive"), usage)
			if resp.Err != nil || resp.Status != 200 {
				t.Errorf("interactive: status %d, err %v; want 200", resp.Status, resp.Err)
				return
			}
			interactiveOK.Add(1)
		})
	}
	wg.Wait()
	if batch429.Load() == 0 {
		t.Fatal("no batch request was refused")
	}
	if batchOK.Load() > 8 {
		t.Errorf("batch admitted %d requests (%d tokens), want at most 8 (the 8400 not kept)", batchOK.Load(), batchOK.Load()*1010)
	}
	if interactiveOK.Load() != 3 {
		t.Errorf("interactive admitted %d, want 3", interactiveOK.Load())
	}
	// Whatever batch took, interactive traffic takes the rest of the
	// whole limit; a request without the header is batch.
	wantStatus(t, r.envoy.Do(t.Context(), tierChat("tb", ""), nil), 429)
	if used := r.used(t, "tiered-tpm", nil); used > 12000 {
		t.Errorf("counter holds %d, more than the limit", used)
	}
}
