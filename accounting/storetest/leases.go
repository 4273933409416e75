package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// leaseTests are the cases for concurrent limits' leases, run by [Run].
var leaseTests = []struct {
	name string
	fn   func(t *testing.T, h Harness)
}{
	{"Leases", testLeases},
	{"LeasesReleased", testLeasesReleased},
	{"LeaseExpires", testLeaseExpires},
	{"LeaseIdleExpiry", testLeaseIdleExpiry},
	{"LeasesAllOrNothing", testLeasesAllOrNothing},
	{"LeasesConcurrent", testLeasesConcurrent},
}

func leaseCounter(name string, limit int64, lease time.Duration) accounting.Counter {
	l := accounting.Limit{Name: name, Dimension: accounting.Concurrent, Algorithm: accounting.Leases, Limit: limit, Window: lease}
	return l.Counter(nil)
}

// testLeases: a limit of 2 admits two requests in flight, refuses a third
// (retry after ConcurrentRetryAfter), and admits again once one settles.
func testLeases(t *testing.T, h Harness) {
	c := leaseCounter("leases", 2, time.Minute)
	resA, reqA := reserve(t, h, item(c, 1))
	if !resA.Admitted {
		t.Fatalf("first request rejected: %+v", resA.States[0])
	}
	assertRemaining(t, resA.States[0], 1)
	assertRemaining(t, mustAdmit(t, h, c, 1), 0)
	st := mustReject(t, h, c, 1)
	assertRemaining(t, st, 0)
	if st.NeverFits || st.RetryAfter != accounting.ConcurrentRetryAfter {
		t.Errorf("rejection: got never fits %v, retry after %v; want false, %v", st.NeverFits, st.RetryAfter, accounting.ConcurrentRetryAfter)
	}
	// The settlement returns the lease whatever the amounts say.
	settle(t, h, reqA, resA, 0)
	assertRecord(t, h, reqA.ID, false)
	assertRemaining(t, mustAdmit(t, h, c, 1), 0)
	mustReject(t, h, c, 1)
	// Settling again returns nothing more.
	if err := h.Store.Settle(context.Background(), settleRequest(reqA, resA, 0)); !errors.Is(err, accounting.ErrNoReservation) {
		t.Fatalf("second Settle: got %v, want ErrNoReservation", err)
	}
	mustReject(t, h, c, 1)
	// A request larger than the limit never fits.
	if st := mustReject(t, h, leaseCounter("leases-one", 1, time.Minute), 2); !st.NeverFits {
		t.Errorf("2 leases on a limit of 1: got never fits false, want true")
	}
}

// testLeasesReleased: releasing a recorded reservation returns its
// lease; releasing one that never arrived keeps it from taking one.
func testLeasesReleased(t *testing.T, h Harness) {
	c := leaseCounter("leases-rel", 1, time.Minute)
	res, req := reserve(t, h, item(c, 1))
	if !res.Admitted {
		t.Fatalf("rejected: %+v", res.States[0])
	}
	mustReject(t, h, c, 1)
	release(t, h, req, true)
	other := accounting.ReserveRequest{ID: newID(), Items: []accounting.ReserveItem{item(c, 1)}}
	release(t, h, other, false)
	if _, err := h.Store.Reserve(context.Background(), other); !errors.Is(err, accounting.ErrReleased) {
		t.Fatalf("Reserve after its Release: got %v, want ErrReleased", err)
	}
	mustAdmit(t, h, c, 1)
}

// testLeaseExpires: a lease never returned (its replica died) frees
// itself after the lease, on the store's clock; the late settlement of
// the abandoned reservation must then not return anyone else's lease.
func testLeaseExpires(t *testing.T, h Harness) {
	const lease = 10 * time.Second
	c := leaseCounter("leases-exp", 1, lease)
	resA, reqA := reserve(t, h, item(c, 1))
	if !resA.Admitted {
		t.Fatalf("rejected: %+v", resA.States[0])
	}
	h.Advance(lease - time.Second)
	mustReject(t, h, c, 1)
	h.Advance(time.Second)
	mustAdmit(t, h, c, 1)
	settle(t, h, reqA, resA, 0)
	mustReject(t, h, c, 1)
}

// testLeaseIdleExpiry: the store reclaims a counter of leases no later
// than its lease after the last one was taken.
func testLeaseIdleExpiry(t *testing.T, h Harness) {
	const lease = 10 * time.Second
	c := leaseCounter("leases-idle", 3, lease)
	mustAdmit(t, h, c, 1)
	ttl, ok := h.TTL(c.Key)
	if !ok {
		t.Fatalf("key %s missing right after a lease was taken", c.Key)
	}
	if ttl <= 0 || ttl > lease+time.Second+h.Tolerance {
		t.Errorf("ttl: got %v, want in (0, %v]", ttl, lease+time.Second)
	}
	// Once every lease is back, nothing is left to keep.
	d := leaseCounter("leases-idle-back", 3, lease)
	res, req := reserve(t, h, item(d, 1))
	settle(t, h, req, res, 0)
	if _, ok := h.TTL(d.Key); ok {
		t.Errorf("key %s still there after its only lease came back", d.Key)
	}
}

// testLeasesAllOrNothing: a request refused by another limit takes no
// lease, and a lease refused leaves the other limits uncharged.
func testLeasesAllOrNothing(t *testing.T, h Harness) {
	c := leaseCounter("leases-aon", 1, time.Minute)
	full := counter("leases-aon-fixed", accounting.FixedWindow, 5, time.Hour)
	mustAdmit(t, h, full, 5)
	if res, _ := reserve(t, h, item(c, 1), item(full, 1)); res.Admitted {
		t.Fatalf("admitted past a full fixed window")
	}
	tokens := counter("leases-aon-tokens", accounting.FixedWindow, 100, time.Hour)
	res, req := reserve(t, h, item(c, 1), item(tokens, 40))
	if !res.Admitted {
		t.Fatalf("lease refused with no lease taken: %+v", res.States)
	}
	if res, _ := reserve(t, h, item(c, 1), item(tokens, 40)); res.Admitted {
		t.Fatalf("second lease admitted on a limit of 1")
	}
	assertRemaining(t, mustAdmit(t, h, tokens, 0), 60)
	// Settling both: the lease comes back and the tokens are corrected.
	settle(t, h, req, res, 0, 10)
	assertRemaining(t, mustAdmit(t, h, tokens, 0), 90)
	mustAdmit(t, h, c, 1)
}

// testLeasesConcurrent: requests racing for a limit of 10 get exactly 10
// leases.
func testLeasesConcurrent(t *testing.T, h Harness) {
	const limit, workers = 10, 100
	c := leaseCounter("leases-race", limit, time.Minute)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			res, err := h.Store.Reserve(context.Background(), accounting.ReserveRequest{ID: newID(), Items: []accounting.ReserveItem{item(c, 1)}})
			if err != nil {
				errs <- err
				return
			}
			if res.Admitted {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Reserve: %v", err)
	}
	if got := admitted.Load(); got != limit {
		t.Errorf("admitted: got %d, want %d", got, limit)
	}
}
