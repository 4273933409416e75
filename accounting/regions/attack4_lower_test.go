package regions

import (
	"context"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// A reload lowers a limit kept across regions below what the region
// already spent in the window: as on one store, the region admits no
// more, whatever it was granted before under the old limit.
func TestAttackReloadLowersLimitBelowGrant(t *testing.T) {
	rdb := startLedger(t)
	clock := &simClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	eu := newTestRegion(t, rdb, clock, "eu", globalLimit(1000))
	// The region acquires 900 for a request that uses 600.
	if !eu.reserveUsing(t, 900, 600) {
		t.Fatal("900 of 1000: got refused, want admitted")
	}
	lower, err := eu.lim.Reconfigure(accounting.Options{Limits: []accounting.Limit{globalLimit(500)}, Regional: eu.region})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lower.Close(context.Background()) })
	res, err := lower.Reserve(context.Background(), accounting.Request{
		Attributes: accounting.Attributes{{Name: "model", Value: "m"}},
		Model:      "m",
		Estimate:   accounting.Estimate{InputTokens: 10},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Admitted {
		t.Errorf("10 more after 600 spent, the limit lowered to 500: got admitted, want refused")
	}
}
