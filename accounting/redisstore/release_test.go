package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// TestTimedOutReservationReleased stalls Redis past the store timeout
// while the Limiter reserves, under fail-closed and fail-open limits: the
// reservation fails (503) or is admitted without one, and once Redis
// answers again the Limiter's background release leaves nothing charged.
//
// With CLIENT PAUSE, Redis 7.0 drops the paused command when its client
// closes the connection on the timeout: the release finds nothing and
// leaves a tombstone. With DEBUG SLEEP the command waits in the socket
// and runs when Redis wakes, usually before the release (which refunds
// it), though a release retry queued during the sleep may run first.
func TestTimedOutReservationReleased(t *testing.T) {
	pause := func(t *testing.T, admin *redis.Client) <-chan error {
		done := make(chan error, 1)
		done <- admin.Do(context.Background(), "CLIENT", "PAUSE", "500", "ALL").Err()
		return done
	}
	sleep := func(t *testing.T, admin *redis.Client) <-chan error {
		done := make(chan error, 1)
		go func() { done <- admin.Do(context.Background(), "DEBUG", "SLEEP", "0.5").Err() }()
		// Let the sleep begin (it holds Redis, so anything sent after it
		// waits).
		time.Sleep(50 * time.Millisecond)
		return done
	}
	tests := []struct {
		name     string
		failOpen bool
		stall    func(t *testing.T, admin *redis.Client) <-chan error
		outcome  string // "" when either is right
	}{
		{"client pause/deny", false, pause, ""},
		{"client pause/allow", true, pause, ""},
		// Usually the stalled Reserve runs first and the release refunds
		// it; a release retry queued during the sleep can also run first
		// and leave a tombstone. Either way nothing stays charged.
		{"debug sleep/deny", false, sleep, ""},
		{"debug sleep/allow", true, sleep, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t)
			admin := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 5 * time.Second, MaxRetries: -1})
			defer admin.Close()
			s := newStore(t, srv, Options{Timeout: faultTimeout})
			ctx := context.Background()
			lim := accounting.Limit{Name: "stall", Dimension: accounting.Tokens, Algorithm: accounting.FixedWindow, Limit: 1 << 40, Window: time.Hour}
			if tt.failOpen {
				lim.OnStoreError = accounting.FailOpen
			}
			// Keep clear of an hour boundary: the release must find the
			// reservation's window.
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
			// Load the library and open a connection before the stall.
			if _, err := s.Release(ctx, accounting.ReserveRequest{ID: "warm-up"}); err != nil {
				t.Fatal(err)
			}

			stalled := tt.stall(t, admin)
			r, err := l.Reserve(ctx, accounting.Request{Estimate: accounting.Estimate{InputTokens: 100, OutputTokens: 900}})
			if tt.failOpen {
				if err != nil || !r.Admitted || !r.FailedOpen {
					t.Fatalf("Reserve on a stalled Redis: got %+v, %v; want admitted, failed open", r, err)
				}
			} else if !errors.Is(err, accounting.ErrStoreUnavailable) {
				t.Fatalf("Reserve on a stalled Redis: got %v, want ErrStoreUnavailable", err)
			}
			if err := <-stalled; err != nil {
				t.Fatal(err)
			}
			waitUntil(t, 10*time.Second, "Redis answering", func() bool { return s.Ping(ctx) == nil })
			took := waitUntil(t, 30*time.Second, "the release", func() bool {
				return counterValue(t, reg, "tokenwarden_releases_total", "released")+counterValue(t, reg, "tokenwarden_releases_total", "not_applied") == 1
			})
			closeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if err := l.Close(closeCtx); err != nil {
				t.Fatal(err)
			}
			released := counterValue(t, reg, "tokenwarden_releases_total", "released")
			t.Logf("the release landed %v after Redis answered again; the reservation had been applied: %v", took, released == 1)
			if tt.outcome != "" {
				if got := counterValue(t, reg, "tokenwarden_releases_total", tt.outcome); got != 1 {
					t.Errorf("releases %s: got %v, want 1", tt.outcome, got)
				}
			}
			if lost := counterValue(t, reg, "tokenwarden_releases_total", "lost"); lost != 0 {
				t.Errorf("releases lost: got %v, want 0", lost)
			}
			if used := fixedUsed(t, admin, lim.Counter(nil).Key); used != 0 {
				t.Errorf("used after the release: got %d, want 0", used)
			}
		})
	}
}
