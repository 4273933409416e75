package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// TestLeasesOfDeadReplica: two replicas (Limiters, each on its own
// Store) share a concurrent limit of 2 on one Redis. Replica a admits a
// request and dies mid-stream: it never settles. Replica b's requests see
// a's lease, and it frees on its own once the lease has passed on Redis's
// own clock (TIME, as in production: no test offset), within a bounded
// wait; b's own leases come back at settlement as usual.
func TestLeasesOfDeadReplica(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	limits := []accounting.Limit{{
		Name: "in-flight", Dimension: accounting.Concurrent, Algorithm: accounting.Leases,
		Scope: []string{"tenant"}, Limit: 2, Window: accounting.MinLease,
	}}
	newReplica := func() *accounting.Limiter {
		l, err := accounting.New(accounting.Options{Store: newStore(t, srv, Options{}), Limits: limits})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return l
	}
	a, b := newReplica(), newReplica()
	req := accounting.Request{Attributes: accounting.Attributes{{Name: "tenant", Value: "t1"}}}
	reserve := func(l *accounting.Limiter) *accounting.Reservation {
		t.Helper()
		r, err := l.Reserve(ctx, req)
		if err != nil {
			t.Fatalf("Reserve: %v", err)
		}
		return r
	}

	if r := reserve(a); !r.Admitted {
		t.Fatalf("replica a: rejected, want admitted")
	}
	// a dies here: its reservation is never settled.
	taken := time.Now()
	rb := reserve(b)
	if !rb.Admitted {
		t.Fatalf("replica b: first request rejected, want admitted")
	}
	if r := reserve(b); r.Admitted {
		t.Fatalf("replica b: third request in flight admitted, want rejected")
	} else if r.Trip.RetryAfter != accounting.ConcurrentRetryAfter || r.Trip.Limit.Name != "in-flight" {
		t.Errorf("rejection: got limit %q retry after %v, want in-flight, %v", r.Trip.Limit.Name, r.Trip.RetryAfter, accounting.ConcurrentRetryAfter)
	}
	if _, err := rb.Settle(ctx, accounting.Usage{}); err != nil {
		t.Fatalf("Settle: %v", err)
	}
	rb = reserve(b)
	if !rb.Admitted {
		t.Fatalf("replica b: rejected after its own lease came back, want admitted")
	}
	if r := reserve(b); r.Admitted {
		t.Fatalf("replica b: admitted while a's lease still counts")
	}

	// a's lease frees within the lease: poll, bounded, on Redis's clock.
	deadline := taken.Add(accounting.MinLease + 3*time.Second)
	for {
		if r := reserve(b); r.Admitted {
			if since := time.Since(taken); since < accounting.MinLease-250*time.Millisecond {
				t.Fatalf("a's lease freed after %v, before its lease of %v", since, accounting.MinLease)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's lease still held %v after it was taken (lease %v)", time.Since(taken), accounting.MinLease)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLeaseExpiryOnStoreClock is the dead replica's case on the store's
// clock, moved by the test instead of waited for: the default lease of
// 15 minutes.
func TestLeaseExpiryOnStoreClock(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	dead, live := newStore(t, srv, Options{}), newStore(t, srv, Options{})
	c := (&accounting.Limit{Name: "in-flight", Dimension: accounting.Concurrent, Algorithm: accounting.Leases,
		Limit: 1, Window: accounting.DefaultLease}).Counter(nil)
	item := []accounting.ReserveItem{{Counter: c, Amount: 1}}
	if res, err := dead.Reserve(ctx, accounting.ReserveRequest{ID: "dead-1", Items: item}); err != nil || !res.Admitted {
		t.Fatalf("dead replica's Reserve: %+v, %v", res, err)
	}
	try := func(id string) bool {
		t.Helper()
		res, err := live.Reserve(ctx, accounting.ReserveRequest{ID: id, Items: item})
		if err != nil {
			t.Fatalf("Reserve: %v", err)
		}
		return res.Admitted
	}
	advance(live, accounting.DefaultLease-time.Second)
	if try("live-1") {
		t.Fatalf("admitted a second before the dead replica's lease ends")
	}
	advance(live, time.Second)
	if !try("live-2") {
		t.Fatalf("rejected once the dead replica's lease ended")
	}
}
