package regions

import (
	"context"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// A reload removes the limit kept across regions (or renames it, or
// stops keeping it across regions): the region gives back all it holds
// of the old counter unused at its next sync, and stops syncing it. It
// once kept the lease, and renewed it, for the life of the process.
func TestRegionRetainGivesBackRemovedLimits(t *testing.T) {
	rdb := startLedger(t)
	l := &link{maxDelay: time.Microsecond}
	rdb.AddHook(l)
	clock := &simClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	global := globalLimit(1000)
	eu := newTestRegion(t, rdb, clock, "eu", global)
	if !eu.reserve(t, 30) {
		t.Fatal("30 of 1000: got refused, want admitted")
	}
	counter := global.Counter(accounting.Attributes{{Name: "model", Value: "m"}})

	renamed := global
	renamed.Name = "company-2"
	eu.region.Retain([]accounting.Limit{renamed})
	if err := eu.region.Sync(context.Background()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	s, err := eu.region.snapshot(context.Background(), &counter)
	if err != nil {
		t.Fatal(err)
	}
	st := ledgerState(t, rdb, eu.region.window(&counter, s))["eu"]
	if held := st[0] - st[1]; held != 30 {
		t.Errorf("after the limit was renamed: the ledger holds %d for eu (granted %d, released %d), want only what it spent, 30", held, st[0], st[1])
	}
	calls := l.calls.Load()
	if err := eu.region.Sync(context.Background()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if got := l.calls.Load() - calls; got != 0 {
		t.Errorf("a sync after the old limit was given back: got %d ledger calls, want 0", got)
	}

	// A limit still in force keeps its lease.
	us := newTestRegion(t, rdb, clock, "us", global)
	if !us.reserve(t, 30) {
		t.Fatal("us: 30 of 1000: got refused, want admitted")
	}
	us.region.Retain([]accounting.Limit{global})
	if err := us.region.Sync(context.Background()); err != nil {
		t.Fatalf("us: Sync: %v", err)
	}
	if st := ledgerState(t, rdb, us.region.window(&counter, s))["us"]; st[0]-st[1] <= 30 {
		t.Errorf("a limit still in force: the ledger holds %d for us, want its chunk, more than the 30 spent", st[0]-st[1])
	}
}
