package regions

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// deadlineHook records how long each ledger call had left of its
// context when it was sent.
type deadlineHook struct {
	mu   sync.Mutex
	left []time.Duration
}

func (h *deadlineHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *deadlineHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if d, ok := ctx.Deadline(); ok {
			h.mu.Lock()
			h.left = append(h.left, time.Until(d))
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (h *deadlineHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A request that does not fit the region's lease acquires more within
// the default AcquireTimeout, which must leave the ledger call room for
// a round trip to another region (300ms, say) after the store read: the
// default once was 250ms in all, so that every request-driven acquire
// from a ledger that far away timed out.
func TestRegionDefaultAcquireTimeoutSpansARoundTrip(t *testing.T) {
	const roundTrip = 300 * time.Millisecond
	rdb := startLedger(t)
	hook := &deadlineHook{}
	rdb.AddHook(hook)
	clock := &simClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	store := memstore.New(memstore.Options{Now: clock.Now})
	region, err := New(Options{
		Name: "eu", Store: store, Ledger: NewLedger(rdb, LedgerOptions{Now: clock.Now, Timeout: time.Hour}),
		Now: clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := accounting.New(accounting.Options{Store: store, Limits: []accounting.Limit{globalLimit(1000)}, Regional: region})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lim.Close(context.Background()) })
	if !(testRegion{region: region, lim: lim}).reserve(t, 10) {
		t.Fatal("10 of 1000: got refused, want admitted")
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	if len(hook.left) == 0 {
		t.Fatal("the request acquired without calling the ledger")
	}
	if got := hook.left[0]; got < roundTrip {
		t.Errorf("the request's ledger call had %s left, want at least a round trip to another region, %s", got, roundTrip)
	}
}
