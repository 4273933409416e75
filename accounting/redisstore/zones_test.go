package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// TestZonedWindowFollowsTheStoreClock has the replica's clock and
// Redis's disagree across a Berlin midnight, each way: Redis's time picks
// the day, as memstore at that time does, whatever the replica thinks.
func TestZonedWindowFollowsTheStoreClock(t *testing.T) {
	srv := redistest.Start(t)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	midnight := time.Date(2027, 3, 28, 0, 0, 0, 0, berlin) // a 23-hour day follows
	tests := []struct {
		name      string
		store     time.Duration // the store's time, from midnight
		skew      time.Duration // the replica's error
		wantRem   int64         // after reserving 100 on 900 used the day before
		wantReset time.Duration
	}{
		{"the store is past midnight, the replica not", 5 * time.Second, -10 * time.Second, 900, 23*time.Hour - 5*time.Second},
		{"the replica is past midnight, the store not", -5 * time.Second, 10 * time.Second, 0, 5 * time.Second},
		{"both agree", 5 * time.Second, 0, 900, 23*time.Hour - 5*time.Second},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t, srv, Options{})
			l := accounting.Limit{Name: fmt.Sprintf("skew%d", i), Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarDay,
				Window: 24 * time.Hour, Limit: 1000, Location: berlin}
			c := l.Counter(nil)
			reserve := func(id string, amount int64) accounting.ReserveResult {
				t.Helper()
				res, err := s.Reserve(context.Background(), accounting.ReserveRequest{ID: id, Items: []accounting.ReserveItem{{Counter: c, Amount: amount}}})
				if err != nil || !res.Admitted {
					t.Fatalf("reserve %d: admitted %v, err %v", amount, res.Admitted, err)
				}
				return res
			}
			s.frozen.Store(midnight.Add(-time.Minute).UnixMicro())
			reserve(fmt.Sprintf("before-%d", i), 900)

			s.frozen.Store(midnight.Add(tt.store).UnixMicro())
			s.skew.Store(tt.skew.Microseconds())
			st := reserve(fmt.Sprintf("at-%d", i), 100).States[0]
			if st.Remaining != tt.wantRem || st.Reset != tt.wantReset {
				t.Errorf("got remaining %d, reset %v; want %d, %v", st.Remaining, st.Reset, tt.wantRem, tt.wantReset)
			}
		})
	}
}
