package regions

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// ledgerOp is one call on the ledger in a test: an acquire (want > 0 or
// acquire true) or a report, by a region, at a time (s after t0).
type ledgerOp struct {
	at       int64 // seconds after t0
	region   string
	inc      int64         // the caller's incarnation
	lapse    time.Duration // the caller's lease TTL + grace; 0 means 40s
	acquire  bool
	want     int64
	used     int64
	returned int64

	// what it must answer
	wantGot  int64
	wantHold Holding
}

func TestLedger(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	// A time whose µs do not survive %.14g: the ledger must keep them.
	t0 := time.UnixMicro(1_780_000_000_123_457)

	tests := []struct {
		name string
		ops  []ledgerOp
	}{
		{"grants what is free, up to what is asked", []ledgerOp{
			{region: "eu", acquire: true, want: 600, wantGot: 600, wantHold: Holding{Granted: 600}},
			{region: "us", acquire: true, want: 600, wantGot: 400, wantHold: Holding{Granted: 400}},
			{region: "us", acquire: true, want: 1, wantGot: 0, wantHold: Holding{Granted: 400}},
		}},
		{"a return frees budget for the others", []ledgerOp{
			{region: "eu", acquire: true, want: 1000, wantGot: 1000, wantHold: Holding{Granted: 1000}},
			{region: "eu", used: 700, returned: 200, wantHold: Holding{Granted: 1000, Released: 200}},
			{region: "us", acquire: true, want: 500, wantGot: 200, wantHold: Holding{Granted: 200}},
		}},
		{"returns only ever grow", []ledgerOp{
			{region: "eu", acquire: true, want: 1000, wantGot: 1000, wantHold: Holding{Granted: 1000}},
			{region: "eu", used: 100, returned: 300, wantHold: Holding{Granted: 1000, Released: 300}},
			{region: "eu", used: 100, returned: 200, wantHold: Holding{Granted: 1000, Released: 300}},
		}},
		{"use above the lease holds budget too", []ledgerOp{
			{region: "eu", acquire: true, want: 500, wantGot: 500, wantHold: Holding{Granted: 500}},
			{region: "eu", used: 650, wantHold: Holding{Granted: 500}},
			{region: "us", acquire: true, want: 1000, wantGot: 350, wantHold: Holding{Granted: 350}},
		}},
		{"a lease lapses only after its lapse", []ledgerOp{
			{region: "eu", acquire: true, want: 800, wantGot: 800, wantHold: Holding{Granted: 800}},
			{region: "eu", used: 300, wantHold: Holding{Granted: 800}},
			{at: 40, region: "us", acquire: true, want: 1000, wantGot: 200, wantHold: Holding{Granted: 200}},
			{at: 41, region: "us", acquire: true, want: 1000, wantGot: 500, wantHold: Holding{Granted: 700, Reclaimed: 500}},
			{at: 42, region: "eu", used: 310, wantHold: Holding{Granted: 800, Released: 500}},
		}},
		{"each region's own lapse counts", []ledgerOp{
			{region: "eu", lapse: 5 * time.Minute, acquire: true, want: 800, wantGot: 800, wantHold: Holding{Granted: 800}},
			{at: 60, region: "us", acquire: true, want: 1000, wantGot: 200, wantHold: Holding{Granted: 200}},
			{at: 299, region: "fr", acquire: true, want: 1000, wantGot: 200, wantHold: Holding{Granted: 200, Reclaimed: 200}},
			{at: 301, region: "fr", acquire: true, want: 1000, wantGot: 800, wantHold: Holding{Granted: 1000, Reclaimed: 800}},
		}},
		{"a region that reports keeps its lease", []ledgerOp{
			{region: "eu", acquire: true, want: 800, wantGot: 800, wantHold: Holding{Granted: 800}},
			{at: 30, region: "eu", used: 100, wantHold: Holding{Granted: 800}},
			{at: 60, region: "eu", used: 200, wantHold: Holding{Granted: 800}},
			{at: 90, region: "us", acquire: true, want: 1000, wantGot: 200, wantHold: Holding{Granted: 200}},
		}},
		{"a new incarnation writes off what the last one held, for good", []ledgerOp{
			{region: "eu", inc: 1, acquire: true, want: 600, wantGot: 600, wantHold: Holding{Granted: 600}},
			{region: "eu", inc: 1, used: 300, wantHold: Holding{Granted: 600}},
			{region: "us", lapse: 5 * time.Minute, acquire: true, want: 1000, wantGot: 400, wantHold: Holding{Granted: 400}},
			{region: "us", lapse: 5 * time.Minute, used: 300, wantHold: Holding{Granted: 400}},
			{at: 1, region: "eu", inc: 2, acquire: true, want: 500, wantGot: 0, wantHold: Holding{Superseded: true, WrittenOff: 600}},
			{at: 100, region: "us", lapse: 5 * time.Minute, used: 300, returned: 100, wantHold: Holding{Granted: 400, Released: 100}},
			{at: 100, region: "eu", inc: 2, acquire: true, want: 500, wantGot: 100, wantHold: Holding{Granted: 100}},
		}},
		{"two incarnations of a name are each capped by their own grants", []ledgerOp{
			{region: "eu", inc: 1, acquire: true, want: 300, wantGot: 300, wantHold: Holding{Granted: 300}},
			{region: "eu", inc: 2, acquire: true, want: 300, wantGot: 300, wantHold: Holding{Granted: 300, Superseded: true, WrittenOff: 300}},
			{region: "eu", inc: 1, acquire: true, want: 1000, wantGot: 400, wantHold: Holding{Granted: 700, Superseded: true, WrittenOff: 300}},
			{region: "eu", inc: 2, used: 300, wantHold: Holding{Granted: 300, Superseded: true, WrittenOff: 700}},
			{region: "eu", inc: 2, acquire: true, want: 1, wantGot: 0, wantHold: Holding{Granted: 300}},
		}},
		{"a grant whose answer was lost is the same incarnation's", []ledgerOp{
			{region: "eu", inc: 1, acquire: true, want: 300, wantGot: 300, wantHold: Holding{Granted: 300}},
			{region: "eu", inc: 1, used: 0, wantHold: Holding{Granted: 300}},
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var now time.Time
			l := NewLedger(rdb, LedgerOptions{Now: func() time.Time { return now }})
			for j, op := range tt.ops {
				now = t0.Add(time.Duration(op.at) * time.Second)
				w := Window{Key: "k" + strconv.Itoa(i), Mark: 7, Limit: 1000, Lapse: 40 * time.Second, Expire: time.Hour, Incarnation: op.inc}
				if op.lapse != 0 {
					w.Lapse = op.lapse
				}
				var got int64
				var h Holding
				var err error
				if op.acquire {
					got, h, err = l.Acquire(context.Background(), op.region, w, op.want)
				} else {
					h, err = l.Report(context.Background(), op.region, w, op.used, op.returned)
				}
				if err != nil {
					t.Fatalf("op %d: %v", j, err)
				}
				if got != op.wantGot || h != op.wantHold {
					t.Errorf("op %d (%s at %ds): got %d and %+v, want %d and %+v", j, op.region, op.at, got, h, op.wantGot, op.wantHold)
				}
			}
		})
	}

	t.Run("keeps the time to the microsecond", func(t *testing.T) {
		l := NewLedger(rdb, LedgerOptions{Now: func() time.Time { return t0 }})
		w := Window{Key: "time", Mark: 1, Limit: 10, Lapse: time.Second, Expire: time.Hour}
		if _, _, err := l.Acquire(context.Background(), "eu", w, 1); err != nil {
			t.Fatal(err)
		}
		got, err := rdb.HGet(context.Background(), LedgerKeyPrefix+"time:1", "t:eu#0").Result()
		if want := strconv.FormatInt(t0.UnixMicro(), 10); err != nil || got != want {
			t.Errorf("got t:eu %q (%v), want %q", got, err, want)
		}
	})

	t.Run("Redis time when no clock is given", func(t *testing.T) {
		l := NewLedger(rdb, LedgerOptions{})
		w := Window{Key: "redis-time", Mark: 1, Limit: 10, Lapse: time.Second, Expire: time.Hour}
		if _, _, err := l.Acquire(context.Background(), "eu", w, 1); err != nil {
			t.Fatal(err)
		}
		got, err := rdb.HGet(context.Background(), LedgerKeyPrefix+"redis-time:1", "t:eu#0").Int64()
		if now := time.Now().UnixMicro(); err != nil || got < now-int64(time.Minute/time.Microsecond) || got > now+int64(time.Minute/time.Microsecond) {
			t.Errorf("got t:eu %d (%v), want Redis's time, about %d", got, err, now)
		}
	})

	t.Run("a call that hangs ends at the timeout", func(t *testing.T) {
		hung := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
		t.Cleanup(func() { _ = hung.Close() })
		hung.AddHook(hangHook{})
		l := NewLedger(hung, LedgerOptions{Timeout: 10 * time.Millisecond})
		_, _, err := l.Acquire(context.Background(), "eu", Window{Key: "k", Limit: 1, Lapse: time.Second, Expire: time.Second}, 1)
		if !errors.Is(err, ErrLedgerUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("got %v, want ErrLedgerUnavailable and the deadline", err)
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
		t.Cleanup(func() { _ = dead.Close() })
		l := NewLedger(dead, LedgerOptions{Timeout: time.Second})
		_, _, err := l.Acquire(context.Background(), "eu", Window{Key: "k", Limit: 1, Lapse: time.Second, Expire: time.Second}, 1)
		if !errors.Is(err, ErrLedgerUnavailable) {
			t.Errorf("got %v, want ErrLedgerUnavailable", err)
		}
	})
}

// hangHook holds every command until its context ends, as a ledger
// behind a partition that drops packets does.
type hangHook struct{}

func (hangHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (hangHook) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		<-ctx.Done()
		cmd.SetErr(ctx.Err())
		return ctx.Err()
	}
}

func (hangHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
