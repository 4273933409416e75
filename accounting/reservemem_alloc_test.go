package accounting_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// TestReserveSettleAllocs is the regression guard on what a request's
// reservation and settlement allocate, on the memory store: the
// reservation with its items (one allocation up to four limits), its ID
// and keys (one string), the store's answer, and the settlement's
// context freed of the caller's cancellation.
func TestReserveSettleAllocs(t *testing.T) {
	for _, tc := range []struct {
		limits int
		want   float64
	}{
		{1, 4},
		{3, 4},
		{4, 4},
		{6, 7}, // the items allocated apart
	} {
		t.Run(strconv.Itoa(tc.limits), func(t *testing.T) {
			var limits []accounting.Limit
			for i := range tc.limits {
				limits = append(limits, limit("l"+strconv.Itoa(i), accounting.Tokens, 1<<50, "tenant"))
			}
			l := newLimiter(t, memstore.New(memstore.Options{}), limits...)
			req := accounting.Request{Attributes: tenant, Model: "cheap", Estimate: accounting.Estimate{InputTokens: 100, OutputTokens: 400}}
			ctx := context.Background()
			lifecycle := func() {
				r, err := l.Reserve(ctx, req)
				if err != nil || !r.Admitted {
					t.Fatalf("Reserve: admitted=%v err=%v", r != nil && r.Admitted, err)
				}
				if _, err := r.Settle(ctx, accounting.Usage{InputTokens: 100, OutputTokens: 10}); err != nil {
					t.Fatal(err)
				}
			}
			lifecycle() // the counters and the metrics' children exist
			if got := testing.AllocsPerRun(100, lifecycle); got > tc.want {
				t.Errorf("got %.0f allocations per reservation and settlement, want at most %.0f", got, tc.want)
			}
		})
	}
}
