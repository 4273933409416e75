package redisstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// faultTimeout is the store timeout of the fault tests: short, as in
// production (50ms), with room for a loaded machine and -race.
const faultTimeout = 100 * time.Millisecond

// slack is how much later than its timeout a failing call may return.
const slack = 150 * time.Millisecond

func reserveOne(ctx context.Context, s *Store, c accounting.Counter, amount int64) (accounting.ReserveResult, error) {
	return s.Reserve(ctx, accounting.ReserveRequest{ID: "x", Items: []accounting.ReserveItem{{Counter: c, Amount: amount}}})
}

// waitUntil polls f every 10ms until it returns true or d passes, and
// returns how long that took.
func waitUntil(t *testing.T, d time.Duration, what string, f func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !f() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// TestRedisDown kills Redis under load: every call fails with
// ErrStoreUnavailable within the timeout (no call hangs), and after Redis
// restarts on the same address the same Store serves again within
// seconds, without being recreated.
func TestRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, srv, Options{Timeout: faultTimeout})
	c := fixedCounter("down", 1<<40, time.Hour)
	ctx := context.Background()

	var (
		phase        atomic.Int32 // 0 up, 1 down, 2 back
		okAfter      atomic.Int64 // successes in phase 2
		slowest      atomic.Int64 // longest failing call (ns)
		otherErr     atomic.Value
		failedCalls  atomic.Int64
		stop         = make(chan struct{})
		wg           sync.WaitGroup
		loadRoutines = 4
	)
	for range loadRoutines {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				p := phase.Load()
				start := time.Now()
				_, err := reserveOne(ctx, s, c, 1)
				took := time.Since(start)
				switch {
				case err == nil:
					if p == 2 {
						okAfter.Add(1)
					}
				case !errors.Is(err, accounting.ErrStoreUnavailable):
					otherErr.Store(err)
				default:
					failedCalls.Add(1)
					for {
						cur := slowest.Load()
						if int64(took) <= cur || slowest.CompareAndSwap(cur, int64(took)) {
							break
						}
					}
				}
				if err != nil {
					time.Sleep(time.Millisecond) // do not spin on refused dials
				}
			}
		})
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()

	time.Sleep(100 * time.Millisecond)
	srv.Kill()
	phase.Store(1)
	start := time.Now()
	_, err := reserveOne(ctx, s, c, 1)
	if took := time.Since(start); !errors.Is(err, accounting.ErrStoreUnavailable) || took > faultTimeout+slack {
		t.Errorf("Reserve with Redis down: got %v after %v, want ErrStoreUnavailable within %v", err, took, faultTimeout+slack)
	}
	if err := s.Ping(ctx); !errors.Is(err, accounting.ErrStoreUnavailable) {
		t.Errorf("Ping with Redis down: got %v, want ErrStoreUnavailable", err)
	}
	err = s.Settle(ctx, accounting.SettleRequest{ID: "s", Items: []accounting.SettleItem{{Counter: c, Reserved: 1, Actual: 2}}})
	if !errors.Is(err, accounting.ErrStoreUnavailable) {
		t.Errorf("Settle with Redis down: got %v, want ErrStoreUnavailable", err)
	}
	time.Sleep(300 * time.Millisecond)

	srv.Restart()
	phase.Store(2)
	took := waitUntil(t, 5*time.Second, "Reserve after restart", func() bool {
		_, err := reserveOne(ctx, s, c, 1)
		return err == nil
	})
	t.Logf("Redis back: the same Store served again after %v", took)
	waitUntil(t, 5*time.Second, "load succeeding after restart", func() bool { return okAfter.Load() > 100 })

	t.Logf("while Redis was down: %d calls failed, the slowest after %v", failedCalls.Load(), time.Duration(slowest.Load()))
	if failedCalls.Load() == 0 {
		t.Error("no call failed while Redis was down")
	}
	if got := time.Duration(slowest.Load()); got > faultTimeout+slack {
		t.Errorf("slowest failing call under load: got %v, want at most %v", got, faultTimeout+slack)
	}
	if err, _ := otherErr.Load().(error); err != nil {
		t.Errorf("an error not wrapping ErrStoreUnavailable: %v", err)
	}
}

// TestSlowRedis blocks Redis with DEBUG SLEEP 0.5: a Reserve fails with
// ErrStoreUnavailable after about the timeout, not after the half second,
// and works again once Redis answers.
func TestSlowRedis(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, srv, Options{Timeout: faultTimeout})
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 5 * time.Second, MaxRetries: -1})
	defer admin.Close()
	c := fixedCounter("slow", 1<<40, time.Hour)
	ctx := context.Background()
	if _, err := reserveOne(ctx, s, c, 1); err != nil { // connect, load the script
		t.Fatal(err)
	}

	slept := make(chan error, 1)
	go func() { slept <- admin.Do(ctx, "DEBUG", "SLEEP", "0.5").Err() }()
	time.Sleep(50 * time.Millisecond) // let the sleep begin
	start := time.Now()
	_, err := reserveOne(ctx, s, c, 1)
	took := time.Since(start)
	if !errors.Is(err, accounting.ErrStoreUnavailable) {
		t.Fatalf("Reserve on a sleeping Redis: got %v, want ErrStoreUnavailable", err)
	}
	if took < faultTimeout-10*time.Millisecond || took > faultTimeout+slack {
		t.Errorf("Reserve on a sleeping Redis failed after %v, want about %v (Redis sleeps 500ms)", took, faultTimeout)
	}
	if err := <-slept; err != nil {
		t.Fatalf("DEBUG SLEEP: %v", err)
	}
	if _, err := reserveOne(ctx, s, c, 1); err != nil {
		t.Errorf("Reserve after Redis woke up: %v", err)
	}
	// Two reservations succeeded; a third unit means Redis ran the timed
	// out one when it woke up: a timeout is ambiguous, as the package
	// documentation says.
	t.Logf("units charged: %d (3: the timed-out Reserve ran after all)", fixedUsed(t, adminClient(t, srv), c.Key))
}

// TestSettleRetryLandsOnce settles through the Limiter while the store
// fails: the Limiter retries in the background, and the correction lands
// at most once however many attempts reached Redis (exactly once while
// Redis keeps its data).
func TestSettleRetryLandsOnce(t *testing.T) {
	tests := []struct {
		name string
		// fail makes the store fail for a while and returns a function
		// that waits until it works again.
		fail func(t *testing.T, srv *redistest.Server, admin *redis.Client) (recover func())
		// lost reports that the failure loses Redis's data (a restart
		// without persistence): the reservation's charge and its record
		// are gone, so the settlement has nothing to correct.
		lost bool
	}{
		{
			name: "redis killed and restarted",
			fail: func(t *testing.T, srv *redistest.Server, _ *redis.Client) func() {
				srv.Kill()
				return srv.Restart
			},
			lost: true,
		},
		{
			// CLIENT PAUSE holds commands that reached Redis: the first
			// attempt times out after Redis has it, and may still run
			// when the pause ends. Either way one settlement applies.
			name: "redis paused",
			fail: func(t *testing.T, _ *redistest.Server, admin *redis.Client) func() {
				if err := admin.Do(context.Background(), "CLIENT", "PAUSE", "600", "ALL").Err(); err != nil {
					t.Fatalf("CLIENT PAUSE: %v", err)
				}
				return func() {}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t)
			admin := adminClient(t, srv)
			s := newStore(t, srv, Options{Timeout: faultTimeout})
			ctx := context.Background()
			lim := accounting.Limit{Name: "retry", Dimension: accounting.Tokens, Algorithm: accounting.FixedWindow, Limit: 1 << 40, Window: time.Hour}
			// Keep clear of an hour boundary: the settlement must land in
			// the reservation's window.
			now, err := admin.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			s.offset.Store((time.Hour - time.Duration(now.UnixMicro()%time.Hour.Microseconds())*time.Microsecond + 30*time.Second).Microseconds())
			reg := prometheus.NewRegistry()
			l, err := accounting.New(accounting.Options{Store: s, Limits: []accounting.Limit{lim}, SettleRetry: time.Minute, Registerer: reg})
			if err != nil {
				t.Fatal(err)
			}
			r, err := l.Reserve(ctx, accounting.Request{Estimate: accounting.Estimate{InputTokens: 100, OutputTokens: 100}})
			if err != nil || !r.Admitted {
				t.Fatalf("Reserve: admitted %v, err %v", r != nil && r.Admitted, err)
			}
			key := lim.Counter(nil).Key
			if got := fixedUsed(t, admin, key); got != 200 {
				t.Fatalf("used after reserving: got %d, want 200", got)
			}

			recover := tt.fail(t, srv, admin)
			usage := accounting.Usage{InputTokens: 100, OutputTokens: 150} // 50 more than reserved
			settled, err := r.Settle(ctx, usage)
			if !settled || !errors.Is(err, accounting.ErrStoreUnavailable) {
				t.Fatalf("Settle while the store fails: got settled %v, err %v; want true and ErrStoreUnavailable", settled, err)
			}
			recover()
			waitUntil(t, 10*time.Second, "store reachable again", func() bool { return s.Ping(ctx) == nil })
			// After a restart the retry finds no record: counted as retried
			// when the first attempt may have landed before the crash (a
			// reset connection), or as no_record when it certainly did not.
			waitUntil(t, 10*time.Second, "settlement retried", func() bool {
				return counterValue(t, reg, "tokenwarden_settlements_total", "retried")+counterValue(t, reg, "tokenwarden_settlements_total", "no_record") == 1
			})
			closeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if err := l.Close(closeCtx); err != nil {
				t.Fatal(err)
			}

			want := int64(250)
			if tt.lost {
				want = 0 // the 200 and the record went with the restart
			}
			if got := fixedUsed(t, admin, key); got != want {
				t.Errorf("used after the retried settlement: got %d, want %d", got, want)
			}
			if lost := counterValue(t, reg, "tokenwarden_settlements_total", "lost"); lost != 0 {
				t.Errorf("settlements lost: got %v, want 0", lost)
			}
		})
	}
}

// counterValue reads one labelled counter from reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetValue() == label {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
