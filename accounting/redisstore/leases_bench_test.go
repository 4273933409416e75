package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// BenchmarkLeaseRequest measures one request's store traffic (reserve
// and settle) under a tokens limit plus a second limit per user: a
// fixed-window request count or a calendar day in a time zone (the fast
// paths) or a concurrent limit (a lease; the general path), to show what
// a lease costs, and that a zoned day costs what a fixed window does.
//
//	go test -run '^$' -bench LeaseRequest -benchmem ./accounting/redisstore/
func BenchmarkLeaseRequest(b *testing.B) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	second := map[string]accounting.Limit{
		"zoned-day":  {Name: "user-rpd", Dimension: accounting.Requests, Scope: []string{"user"}, Algorithm: accounting.FixedWindow, Limit: 1 << 50, Calendar: accounting.CalendarDay, Window: 24 * time.Hour, Location: berlin},
		"fixed":      {Name: "user-rph", Dimension: accounting.Requests, Scope: []string{"user"}, Algorithm: accounting.FixedWindow, Limit: 1 << 50, Window: time.Hour},
		"concurrent": {Name: "user-parallel", Dimension: accounting.Concurrent, Scope: []string{"user"}, Algorithm: accounting.Leases, Limit: 1 << 20, Window: time.Minute},
	}
	tokens := accounting.Limit{Name: "user-tpm", Dimension: accounting.Tokens, Scope: []string{"user"}, Algorithm: accounting.FixedWindow, Limit: 1 << 50, Window: time.Hour}
	srv := redistest.Start(b)
	s := newStore(b, srv, Options{Timeout: testTimeout})
	ctx := context.Background()
	for _, name := range []string{"fixed", "zoned-day", "concurrent"} {
		lim := second[name]
		b.Run(name, func(b *testing.B) {
			items := make([][]accounting.ReserveItem, benchUsers)
			for u := range items {
				attrs := accounting.Attributes{{Name: "user", Value: fmt.Sprintf("user-%d", u)}}
				items[u] = []accounting.ReserveItem{{Counter: tokens.Counter(attrs), Amount: 1500}, {Counter: lim.Counter(attrs), Amount: 1}}
			}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				req := accounting.ReserveRequest{ID: fmt.Sprintf("%s-%d", name, i), Items: items[i%benchUsers]}
				res, err := s.Reserve(ctx, req)
				if err != nil || !res.Admitted {
					b.Fatalf("Reserve: admitted %v, err %v", res.Admitted, err)
				}
				sr := accounting.SettleRequest{ID: req.ID, Items: []accounting.SettleItem{
					{Counter: req.Items[0].Counter, Reserved: 1500, Actual: 800, Mark: res.States[0].Mark},
					{Counter: req.Items[1].Counter, Reserved: 1, Actual: 1, Mark: res.States[1].Mark},
				}}
				if lim.Dimension == accounting.Concurrent {
					sr.Items[1].Actual = 0
				}
				if err := s.Settle(ctx, sr); err != nil {
					b.Fatalf("Settle: %v", err)
				}
				lat = append(lat, time.Since(start))
			}
			reportLatency(b, lat)
		})
	}
}
