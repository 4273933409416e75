package regions

import (
	"context"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// At the end of a month the budget is spent, so the region's last ask of
// the ledger found it dry; the month turns within RetryAfter of that.
// The dry ledger was last month's: the first request of the new month is
// decided under the new month's lease (admitted when the ledger answers,
// refused when it is down), never failed as a store error. It once
// failed every request for RetryAfter: the region kept last month's cap,
// each reservation was admitted in April under it, released, and tried
// again under the same cap.
func TestAttackWindowTurnsAfterDry(t *testing.T) {
	tests := []struct {
		name       string
		ledgerDown bool
		admitted   bool
	}{
		{"ledger answers", false, true},
		{"ledger down", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rdb := startLedger(t)
			clock := &simClock{t: time.Date(2026, 3, 31, 23, 59, 59, 500_000_000, time.UTC)}
			eu := newTestRegion(t, rdb, clock, "eu", globalLimit(1000))
			for eu.reserve(t, 100) {
			}
			if tt.ledgerDown {
				_ = rdb.Close()
			}
			clock.Advance(600 * time.Millisecond) // April, 0.6s after the ledger was dry
			res, err := eu.lim.Reserve(context.Background(), accounting.Request{
				Attributes: accounting.Attributes{{Name: "model", Value: "m"}},
				Model:      "m",
				Estimate:   accounting.Estimate{InputTokens: 100},
			})
			if err != nil {
				t.Fatalf("first request of April: got error %v, want admitted %v", err, tt.admitted)
			}
			if res.Admitted != tt.admitted {
				t.Errorf("first request of April: got admitted %v, want %v", res.Admitted, tt.admitted)
			}
		})
	}
}
