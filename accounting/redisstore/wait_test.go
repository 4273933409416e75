package redisstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// TestWaitAcrossReplicas: two replicas (Limiters on one Redis) hold the
// requests a one-per-second limit refuses; each replica orders its own
// waiters, Redis decides between them. Every waiter is admitted, each in
// a window of its own, none beyond the limit.
func TestWaitAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	limits := []accounting.Limit{{Name: "rps", Dimension: accounting.Requests, Scope: []string{"tenant"},
		Algorithm: accounting.FixedWindow, Limit: 1, Window: time.Second, OnExhausted: accounting.OnExhausted{WaitUpTo: 3 * time.Second}}}
	replica := func() *accounting.Limiter {
		l, err := accounting.New(accounting.Options{Store: newStore(t, srv, Options{}), Limits: limits})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() { _ = l.Close(context.Background()) })
		return l
	}
	a, b := replica(), replica()
	req := accounting.Request{Attributes: accounting.Attributes{{Name: "tenant", Value: "t1"}}}
	// Early in a window, so that both waiters are refused by the same
	// one and the window after it admits exactly one of them.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
	if r, err := a.Reserve(t.Context(), req); err != nil || !r.Admitted {
		t.Fatalf("first request: admitted=%v err=%v", r != nil && r.Admitted, err)
	}
	var wg sync.WaitGroup
	results := make([]*accounting.Reservation, 2)
	for i, l := range []*accounting.Limiter{a, b} {
		wg.Go(func() {
			r, err := l.ReserveWaiting(t.Context(), req, func(time.Duration) error { return nil })
			if err != nil {
				t.Errorf("replica %d: %v", i, err)
				return
			}
			results[i] = r
		})
	}
	wg.Wait()
	var took []time.Duration
	for i, r := range results {
		if r == nil {
			continue
		}
		if !r.Admitted || r.Wait.Outcome != accounting.WaitAdmitted || r.Dims[accounting.Requests].Remaining != 0 {
			t.Errorf("replica %d: admitted=%v wait %+v remaining %d, want admitted after a wait, the window's only one",
				i, r.Admitted, r.Wait, r.Dims[accounting.Requests].Remaining)
		}
		took = append(took, r.Wait.Took)
	}
	t.Logf("waits: %v", took)
}
