package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/storetest"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// testTimeout is the store timeout of tests that do not test timeouts:
// generous, so that a loaded machine (or -race) does not fail them.
const testTimeout = 5 * time.Second

// newStore returns a Store on srv, closed when t ends.
func newStore(t testing.TB, srv *redistest.Server, opts Options) *Store {
	t.Helper()
	if opts.URL == "" && len(opts.ClusterAddrs) == 0 {
		opts.URL = srv.URL()
	}
	if opts.Timeout == 0 {
		opts.Timeout = testTimeout
	}
	s, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// adminClient returns a plain client on srv for inspecting and disturbing
// it, closed when t ends.
func adminClient(t testing.TB, srv *redistest.Server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// storeNow returns the Store's clock: Redis's TIME plus the test offset.
func storeNow(t testing.TB, s *Store) time.Time {
	t.Helper()
	if f := s.frozen.Load(); f != 0 {
		return time.UnixMicro(f)
	}
	now, err := s.client.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return now.Add(time.Duration(s.offset.Load()) * time.Microsecond)
}

// advance moves the Store's clock forward by d.
func advance(s *Store, d time.Duration) {
	if s.frozen.Load() != 0 {
		s.frozen.Add(d.Microseconds())
		return
	}
	s.offset.Add(d.Microseconds())
}

// harness adapts a Store to the contract suite.
func harness(t *testing.T, s *Store) storetest.Harness {
	return storetest.Harness{
		Store:   s,
		Now:     func() time.Time { return storeNow(t, s) },
		Advance: func(d time.Duration) { advance(s, d) },
		TTL: func(key string) (time.Duration, bool) {
			// PTTL runs on Redis's real clock, not the offset; the suite
			// reads TTLs only right after a charge, where both agree.
			d, err := s.client.PTTL(context.Background(), s.RedisKey(key)).Result()
			if err != nil {
				t.Fatalf("PTTL: %v", err)
			}
			if d < 0 {
				return 0, false
			}
			return d, true
		},
		Record: func(id string) bool {
			// The record's own time decides, on the Store's clock (as
			// the functions do); PX only reclaims it on Redis's. On the
			// sharded layout any slot's record counts.
			for _, b := range recordValues(t, s, id) {
				if len(b) < 8 || len(b)%8 != 0 {
					t.Fatalf("record %s: %q", id, b)
				}
				at := int64(math.Abs(math.Float64frombits(binary.LittleEndian.Uint64(b))))
				if accounting.RecordExpiry(at) > storeNow(t, s).UnixMicro() {
					return true
				}
			}
			return false
		},
		// Redis's clock keeps running during a test.
		Tolerance: 250 * time.Millisecond,
	}
}

func TestContract(t *testing.T) {
	srv := redistest.Start(t)
	admin := adminClient(t, srv)
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		if err := admin.FlushDB(context.Background()).Err(); err != nil {
			t.Fatalf("FLUSHDB: %v", err)
		}
		return harness(t, newStore(t, srv, Options{}))
	})
}

// TestContractGeneralPath runs the suite with tw_reserve and tw_settle
// kept off their fast paths: the general path alone must keep the
// contract too, since the fast paths give up to it on anything unusual.
func TestContractGeneralPath(t *testing.T) {
	srv := redistest.Start(t)
	admin := adminClient(t, srv)
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		if err := admin.FlushDB(context.Background()).Err(); err != nil {
			t.Fatalf("FLUSHDB: %v", err)
		}
		s := newStore(t, srv, Options{})
		s.general.Store(true)
		return harness(t, s)
	})
}

// TestContractHashTag runs the suite with every key behind a hash tag,
// the Redis Cluster setting.
func TestContractHashTag(t *testing.T) {
	srv := redistest.Start(t)
	admin := adminClient(t, srv)
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		if err := admin.FlushDB(context.Background()).Err(); err != nil {
			t.Fatalf("FLUSHDB: %v", err)
		}
		return harness(t, newStore(t, srv, Options{HashTag: "tw"}))
	})

	s := newStore(t, srv, Options{HashTag: "tw"})
	c := fixedCounter("tagged", 10, time.Hour)
	res, err := s.Reserve(context.Background(), accounting.ReserveRequest{ID: "t1", Items: []accounting.ReserveItem{{Counter: c, Amount: 5}}})
	if err != nil || !res.Admitted {
		t.Fatalf("reserve: admitted %v, err %v", res.Admitted, err)
	}
	if n, err := admin.Exists(context.Background(), "{tw}"+RecordKeyPrefix+"t1").Result(); err != nil || n != 1 {
		t.Errorf("record behind the hash tag: got %d (err %v), want 1", n, err)
	}
	err = s.Settle(context.Background(), accounting.SettleRequest{ID: "t1", Items: []accounting.SettleItem{{Counter: c, Reserved: 5, Actual: 3, Mark: res.States[0].Mark}}})
	if err != nil {
		t.Fatalf("Settle: %v", err)
	}
	keys, err := admin.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatalf("KEYS: %v", err)
	}
	if len(keys) != 1 {
		t.Errorf("keys: got %q, want only the counter (the settlement deleted the record)", keys)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "{tw}"+accounting.KeyPrefix) {
			t.Errorf("key %q: want prefix %q", k, "{tw}"+accounting.KeyPrefix)
		}
	}
}

func TestNewOptions(t *testing.T) {
	tests := []struct {
		name       string
		opts       Options
		wantFields string // the fields Validate names, in order
		wantErr    string // a part of New's error
	}{
		{"no address", Options{}, "url", "url: required, unless sentinel.master_name or cluster_addrs is set"},
		{"bad scheme", Options{URL: "http://user:secret@localhost:6379"}, "url", "url: must start with redis://, rediss:// or unix://"},
		{"not a URL", Options{URL: "redis://:secret@[::1"}, "url", "url: is not a URL"},
		{"bad database", Options{URL: "redis://localhost:6379/x"}, "url", "invalid database"},
		{"bad query parameter", Options{URL: "redis://localhost:6379/0?dial_timeout=soon"}, "url", "invalid dial_timeout duration"},
		{"hash tag with brace", Options{URL: "redis://localhost", HashTag: "a}b"}, "hash_tag", `hash_tag: "a}b" must not contain`},
		{"negative timeout", Options{URL: "redis://localhost", Timeout: -time.Second}, "timeout", "timeout: must not be negative"},
		{"negative pool", Options{URL: "redis://localhost", PoolSize: -1, MinIdleConns: -1}, "pool_size min_idle_conns", "pool_size: must not be negative"},
		{"sentinel without addresses", Options{SentinelMasterName: "mymaster"}, "sentinel.addrs", "sentinel.addrs: required with sentinel.master_name"},
		{"sentinel and cluster", Options{SentinelMasterName: "mymaster", SentinelAddrs: []string{"a:1"}, ClusterAddrs: []string{"b:2"}, HashTag: "tw"},
			"cluster_addrs", "cluster_addrs: cannot be combined with sentinel"},
		{"cluster without hash tag", Options{ClusterAddrs: []string{"localhost:7000"}}, "hash_tag", "hash_tag: required with cluster_addrs"},
		{"every problem at once", Options{URL: "http://x", ClusterAddrs: []string{"a:1"}, SentinelMasterName: "m", PoolSize: -1, HashTag: "{"},
			"url sentinel.addrs cluster_addrs pool_size hash_tag", ""},
		{"plain", Options{URL: "redis://localhost:6379/0"}, "", ""},
		{"unix socket", Options{URL: "unix:///run/redis.sock?db=2"}, "", ""},
		{"tls and password", Options{URL: "rediss://user:secret@localhost:6380/2", PoolSize: 7, MinIdleConns: 1}, "", ""},
		{"sentinel", Options{SentinelMasterName: "mymaster", SentinelAddrs: []string{"localhost:26379"}, URL: "redis://:pw@ignored/1"}, "", ""},
		{"cluster", Options{ClusterAddrs: []string{"localhost:7000", "localhost:7001"}, HashTag: "tw", URL: "rediss://:pw@ignored"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fieldsOf(tt.opts.Validate())
			if strings.Join(got, " ") != tt.wantFields {
				t.Errorf("Validate names %q, want %q", strings.Join(got, " "), tt.wantFields)
			}
			s, err := New(tt.opts)
			if tt.wantFields != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New: got error %v, want one containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("New: the error %q repeats the URL's password", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer s.Close()
			if s.timeout != DefaultTimeout {
				t.Errorf("timeout: got %v, want %v", s.timeout, DefaultTimeout)
			}
		})
	}
}

// fieldsOf lists the fields of the FieldErrors err joins, at any depth.
func fieldsOf(err error) []string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, fieldsOf(e)...)
		}
		return out
	}
	var fe *accounting.FieldError
	if errors.As(err, &fe) {
		return []string{fe.Field}
	}
	if err != nil {
		return []string{"(no field: " + err.Error() + ")"}
	}
	return nil
}

// TestClientSettings: every kind of client New builds carries the
// settings the Store depends on, whatever the URL asks for.
func TestClientSettings(t *testing.T) {
	const timeout = 70 * time.Millisecond
	url := "redis://u:p@example.invalid:6379/1?max_retries=5&read_timeout=9s&pool_timeout=9s"
	tests := []struct {
		name string
		opts Options
	}{
		{"single server", Options{URL: url}},
		{"sentinel", Options{URL: url, SentinelMasterName: "m", SentinelAddrs: []string{"example.invalid:26379"}}},
		{"cluster", Options{URL: url, ClusterAddrs: []string{"example.invalid:7000"}, HashTag: "tw"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Timeout = timeout
			s, err := New(tt.opts)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer s.Close()
			type settings struct {
				MaxRetries                             int
				ContextTimeoutEnabled                  bool
				ReadTimeout, WriteTimeout, PoolTimeout time.Duration
				DialerRetries                          int
				DisableIdentity                        bool
				Username, Password                     string
			}
			var got settings
			switch c := s.client.(type) {
			case *redis.Client:
				o := c.Options()
				got = settings{o.MaxRetries, o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout, o.DialerRetries, o.DisableIdentity, o.Username, o.Password}
			case *redis.ClusterClient:
				o := c.Options()
				got = settings{o.MaxRetries, o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout, o.DialerRetries, o.DisableIdentity, o.Username, o.Password}
				// A ClusterClient keeps -1 ("no retries") as it was given,
				// where a Client stores 0; a 0 here would mean retries.
				if o.MaxRetries != -1 {
					t.Errorf("cluster MaxRetries: got %d, want -1", o.MaxRetries)
				}
				got.MaxRetries = 0
				if o.MaintNotificationsConfig == nil || o.MaintNotificationsConfig.Mode != maintnotifications.ModeDisabled {
					t.Errorf("maintenance notifications: got %+v, want disabled", o.MaintNotificationsConfig)
				}
			default:
				t.Fatalf("client: got %T, want *redis.Client or *redis.ClusterClient", s.client)
			}
			if tt.name == "cluster" {
				if _, ok := s.client.(*redis.ClusterClient); !ok {
					t.Errorf("client for one cluster seed node: got %T, want *redis.ClusterClient", s.client)
				}
			}
			// go-redis reads MaxRetries -1 as "no retries" and stores 0.
			want := settings{0, true, timeout, timeout, timeout, 1, true, "u", "p"}
			if got != want {
				t.Errorf("settings: got %+v, want %+v", got, want)
			}
		})
	}
}

// TestURLSettings checks that what the URL says reaches the connection.
func TestURLSettings(t *testing.T) {
	s, err := New(Options{URL: "rediss://user:secret@example.invalid:6380/3?dial_timeout=3s&client_name=tw&max_idle_conns=4&conn_max_idle_time=1m&pool_fifo=true&pool_size=2",
		PoolSize: 7, Timeout: time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer s.Close()
	o := s.client.(*redis.Client).Options()
	if o.Addr != "example.invalid:6380" || o.Username != "user" || o.Password != "secret" || o.DB != 3 {
		t.Errorf("connection: got addr %q user %q password %q db %d, want example.invalid:6380 user secret 3", o.Addr, o.Username, o.Password, o.DB)
	}
	if o.TLSConfig == nil || o.TLSConfig.ServerName != "example.invalid" {
		t.Errorf("TLS: got %+v, want server name example.invalid", o.TLSConfig)
	}
	if o.PoolSize != 7 {
		t.Errorf("pool size: got %d, want 7 (Options.PoolSize over the URL's)", o.PoolSize)
	}
	if o.DialTimeout != 3*time.Second || o.ClientName != "tw" || o.MaxIdleConns != 4 || o.ConnMaxIdleTime != time.Minute || !o.PoolFIFO {
		t.Errorf("query parameters: got dial_timeout %v client_name %q max_idle_conns %d conn_max_idle_time %v pool_fifo %v, want 3s tw 4 1m true",
			o.DialTimeout, o.ClientName, o.MaxIdleConns, o.ConnMaxIdleTime, o.PoolFIFO)
	}
	// go-redis reads MaxRetries -1 as "no retries" and stores 0.
	if o.MaxRetries != 0 || !o.ContextTimeoutEnabled || o.ReadTimeout != time.Second || o.PoolTimeout != time.Second {
		t.Errorf("retries/timeouts: got MaxRetries %d ContextTimeoutEnabled %v ReadTimeout %v PoolTimeout %v, want 0 true 1s 1s",
			o.MaxRetries, o.ContextTimeoutEnabled, o.ReadTimeout, o.PoolTimeout)
	}
}

// TestLibraryFlushed shows the reload: after FUNCTION FLUSH (as after a
// restart without persistence) the next call of each function loads the
// library again and succeeds, and a library already there (loaded by
// another replica) is used as it is.
func TestLibraryFlushed(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, srv, Options{})
	other := newStore(t, srv, Options{})
	admin := adminClient(t, srv)
	ctx := context.Background()
	c := fixedCounter("flush", 10, time.Hour)
	for i := range 2 {
		if err := admin.FunctionFlush(ctx).Err(); err != nil {
			t.Fatalf("FUNCTION FLUSH: %v", err)
		}
		id := fmt.Sprint("r", i)
		res, err := s.Reserve(ctx, accounting.ReserveRequest{ID: id, Items: []accounting.ReserveItem{{Counter: c, Amount: 2}}})
		if err != nil || !res.Admitted {
			t.Fatalf("reserve %d after FUNCTION FLUSH: admitted %v, err %v; want admitted", i, res.Admitted, err)
		}
		if err := admin.FunctionFlush(ctx).Err(); err != nil {
			t.Fatalf("FUNCTION FLUSH: %v", err)
		}
		if err := s.Settle(ctx, accounting.SettleRequest{ID: id, Items: []accounting.SettleItem{{Counter: c, Reserved: 2, Actual: 1, Mark: res.States[0].Mark}}}); err != nil {
			t.Fatalf("settle %d after FUNCTION FLUSH: %v", i, err)
		}
		// The other Store finds the library loaded.
		if _, err := other.Release(ctx, accounting.ReserveRequest{ID: "never-" + id, Items: []accounting.ReserveItem{{Counter: c, Amount: 1}}}); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
	libs, err := admin.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: lib.name}).Result()
	if err != nil || len(libs) != 1 || len(libs[0].Functions) != 6 {
		t.Errorf("library after reloading: got %+v (err %v), want %s with six functions", libs, err, lib.name)
	}
	if used := fixedUsed(t, admin, c.Key); used != 2 {
		t.Errorf("used: got %d, want 2 (two reservations of 2 settled to 1)", used)
	}
}

// TestOutOfRange shows that numbers a Lua double cannot hold exactly are
// refused rather than rounded.
func TestOutOfRange(t *testing.T) {
	s, err := New(Options{URL: "redis://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	big := fixedCounter("big", 1<<60, time.Hour)
	_, err = s.Reserve(context.Background(), accounting.ReserveRequest{ID: "r", Items: []accounting.ReserveItem{{Counter: big, Amount: 1}}})
	if err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("limit 2^60: got error %v, want out of range", err)
	}
	short := accounting.Counter{Key: "k", Algorithm: accounting.SlidingWindow, Limit: 1, Window: time.Microsecond}
	_, err = s.Reserve(context.Background(), accounting.ReserveRequest{ID: "r", Items: []accounting.ReserveItem{{Counter: short, Amount: 1}}})
	if err == nil || !strings.Contains(err.Error(), "too short") {
		t.Errorf("window 1µs: got error %v, want too short", err)
	}
	if errors.Is(err, accounting.ErrStoreUnavailable) {
		t.Errorf("a bad request is not a store failure: %v", err)
	}
}

// TestRecord follows a reservation's record in Redis: written by the
// reservation to expire once accounting.RecordTTL and a RecordGrain have
// passed (Redis's PX: the record stops counting by its own time, see
// accounting.RecordExpiry), deleted by its settlement, so
// that settling again changes nothing and nothing is left behind.
func TestRecord(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, srv, Options{})
	admin := adminClient(t, srv)
	ctx := context.Background()
	c := fixedCounter("record", 100, time.Hour)
	res, err := s.Reserve(ctx, accounting.ReserveRequest{ID: "res-1", Items: []accounting.ReserveItem{{Counter: c, Amount: 50}}})
	if err != nil || !res.Admitted {
		t.Fatalf("reserve: admitted %v, err %v", res.Admitted, err)
	}
	ttl, err := admin.PTTL(ctx, RecordKeyPrefix+"res-1").Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := accounting.RecordTTL + accounting.RecordGrain; ttl <= want-time.Minute || ttl > want {
		t.Errorf("record TTL: got %v, want about %v", ttl, want)
	}
	rejected, err := s.Reserve(ctx, accounting.ReserveRequest{ID: "res-2", Items: []accounting.ReserveItem{{Counter: c, Amount: 51}}})
	if err != nil || rejected.Admitted {
		t.Fatalf("reserve over the limit: admitted %v, err %v", rejected.Admitted, err)
	}
	if n := admin.Exists(ctx, RecordKeyPrefix+"res-2").Val(); n != 0 {
		t.Errorf("a rejected reservation left a record")
	}
	req := accounting.SettleRequest{ID: "res-1", Items: []accounting.SettleItem{{Counter: c, Reserved: 50, Actual: 20, Mark: res.States[0].Mark}}}
	if err := s.Settle(ctx, req); err != nil {
		t.Fatalf("Settle: %v", err)
	}
	for range 2 {
		if err := s.Settle(ctx, req); !errors.Is(err, accounting.ErrNoReservation) {
			t.Errorf("Settle again: got %v, want ErrNoReservation", err)
		}
	}
	if used := fixedUsed(t, admin, c.Key); used != 20 {
		t.Errorf("used after three settles: got %d, want 20", used)
	}
	keys, err := admin.Keys(ctx, "*").Result()
	if err != nil || len(keys) != 1 || keys[0] != c.Key {
		t.Errorf("keys after settling: got %q (err %v), want only the counter", keys, err)
	}
}

// TestCalendarMonthMatchesGo runs the library's calendar arithmetic at
// exact instants (the frozen test clock) across three centuries, month
// edges and leap days, against accounting.FixedWindowAt. The reservations
// never fit: a rejection's window and reset come from the Lua (an
// admission's are derived in Go from the store's time).
func TestCalendarMonthMatchesGo(t *testing.T) {
	srv := redistest.Start(t)
	s := newStore(t, srv, Options{})
	l := accounting.Limit{Name: "month", Algorithm: accounting.FixedWindow, Calendar: accounting.CalendarMonth, Limit: 10}
	c := l.Counter(nil)

	var instants []time.Time
	for y := 1971; y <= 2250; y += 7 { // (zero is not a frozen time)
		for m := time.January; m <= time.December; m++ {
			start := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
			instants = append(instants, start, start.Add(-time.Microsecond), start.Add(time.Microsecond), start.Add(15*24*time.Hour+7*time.Second))
		}
	}
	for _, y := range []int{2000, 2024, 2100, 2104} { // leap rules: /400, /4, /100
		instants = append(instants,
			time.Date(y, time.February, 28, 23, 59, 59, 999999000, time.UTC),
			time.Date(y, time.February, 29, 12, 0, 0, 0, time.UTC),
			time.Date(y, time.March, 1, 0, 0, 0, 0, time.UTC))
	}
	for _, at := range instants {
		now := at.UnixMicro()
		s.frozen.Store(now)
		res, err := s.Reserve(context.Background(), accounting.ReserveRequest{ID: "m", Items: []accounting.ReserveItem{{Counter: c, Amount: 11}}})
		if err != nil || res.Admitted {
			t.Fatalf("Reserve at %v: admitted %v, err %v; want a rejection", at, res.Admitted, err)
		}
		idx, end := accounting.FixedWindowAt(&c, now)
		st := res.States[0]
		if st.Mark != idx || st.Reset != accounting.Micros(end-now) {
			t.Errorf("at %v: got window %d reset %v, want %d reset %v", at, st.Mark, st.Reset, idx, accounting.Micros(end-now))
		}
	}
}

func fixedCounter(name string, limit int64, window time.Duration) accounting.Counter {
	l := accounting.Limit{Name: name, Algorithm: accounting.FixedWindow, Limit: limit, Window: window}
	return l.Counter(nil)
}

// fixedUsed reads a fixed window counter's usage straight from Redis.
func fixedUsed(t testing.TB, admin *redis.Client, key string) int64 {
	t.Helper()
	v := packedValue(t, admin, key)
	if v == nil {
		return 0
	}
	if len(v) != 2 && (len(v) < 3 || len(v)%2 == 0) {
		t.Fatalf("fixed window %s: got %v, want a window and a usage, then born and pieces or nothing", key, v)
	}
	return int64(v[1])
}

// sliding is a sliding window's value, as library.lua lays it out.
type sliding struct {
	n, total float64
	// slots are the amounts of slots n, n-1, ...
	slots []float64
	born  float64
	// pieces are what reservations in flight hold: start, amount, ...
	pieces []float64
}

// slidingValue reads a sliding window's value straight from Redis (ok
// false: no key).
func slidingValue(t testing.TB, admin *redis.Client, key string) (sliding, bool) {
	t.Helper()
	v := packedValue(t, admin, key)
	if v == nil {
		return sliding{}, false
	}
	if len(v) < 5 {
		t.Fatalf("sliding window %s: %v", key, v)
	}
	k := int(v[3])
	if len(v) < 5+2*k {
		t.Fatalf("sliding window %s: %v: %d pieces", key, v, k)
	}
	return sliding{
		n: v[0], total: v[1], born: v[4],
		slots:  append([]float64{v[2]}, v[5+2*k:]...),
		pieces: v[5 : 5+2*k],
	}, true
}

// packedValue reads a counter straight from Redis: the doubles packed in
// it (see library.lua), or nil if there is no key.
func packedValue(t testing.TB, admin *redis.Client, key string) []float64 {
	t.Helper()
	b, err := admin.Get(context.Background(), key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	if len(b)%8 != 0 {
		t.Fatalf("counter %s: %d bytes, not packed doubles", key, len(b))
	}
	v := make([]float64, len(b)/8)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v
}

// TestSentinel finds the master through Redis Sentinel.
func TestSentinel(t *testing.T) {
	master := redistest.Start(t)
	sentinel := redistest.StartSentinel(t, "tw-master", master.Addr())
	s, err := New(Options{SentinelMasterName: "tw-master", SentinelAddrs: []string{sentinel.Addr()}, Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := fixedCounter("via-sentinel", 10, time.Hour)
	res, err := s.Reserve(context.Background(), accounting.ReserveRequest{ID: "s", Items: []accounting.ReserveItem{{Counter: c, Amount: 3}}})
	if err != nil || !res.Admitted {
		t.Fatalf("Reserve through Sentinel: admitted %v, err %v", res.Admitted, err)
	}
	if used := fixedUsed(t, adminClient(t, master), c.Key); used != 3 {
		t.Errorf("used on the master: got %d, want 3", used)
	}
}
