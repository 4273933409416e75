package memstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/storetest"
)

func TestInspectContract(t *testing.T) {
	storetest.RunInspect(t, func(t *testing.T) storetest.Harness {
		h, _, _ := newHarness(t)
		return h
	})
}

// BenchmarkTop measures a top scan of 10,000 counters, the default
// bound: how long it holds the store's lock.
func BenchmarkTop(b *testing.B) {
	s := New(Options{})
	l := accounting.Limit{Name: "per-user", Algorithm: accounting.SlidingWindow, Limit: 1 << 40, Window: time.Hour, Scope: []string{"user"}}
	for i := range 10_000 {
		c := l.Counter(accounting.Attributes{{Name: "user", Value: strconv.Itoa(i)}})
		if _, err := s.Reserve(b.Context(), accounting.ReserveRequest{ID: c.Key, Items: []accounting.ReserveItem{{Counter: c, Amount: int64(i)}}}); err != nil {
			b.Fatal(err)
		}
	}
	req := accounting.TopRequest{Prefix: accounting.CounterPrefix(&l), Counter: l.Counter(nil), N: 10, MaxScan: accounting.DefaultTopScan}
	for b.Loop() {
		if _, err := s.Top(b.Context(), req); err != nil {
			b.Fatal(err)
		}
	}
}
