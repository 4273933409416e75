package redisstore

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/internal/redistest"
)

// TestCommandsPerCall is BenchmarkScriptCost's figure made exact: what
// Redis spends on a call is mostly the commands the function runs and
// what their answers cost Lua, so it counts them (INFO commandstats) for
// one reservation and its settlement on counters that exist, in the
// window they were last charged in: what nearly every call is. A
// reservation reads every counter with one MGET, writes its record with
// one SET, and overwrites each counter with one SETRANGE (an integer
// answer, where SET's OK costs Lua a table); a settlement takes its
// record with GETDEL and does the same for each counter. In production
// each call also reads TIME once; the test's frozen clock spares it.
// Commands are counted, not timed, so the test fails only when a change
// adds commands, or trades a SETRANGE for a SET.
func TestCommandsPerCall(t *testing.T) {
	srv := redistest.Start(t)
	admin := adminClient(t, srv)
	s := newStore(t, srv, Options{})
	ctx := context.Background()
	// A frozen clock: no window or slot moves between the lifecycles.
	s.frozen.Store(time.Date(2026, time.November, 30, 12, 0, 0, 0, time.UTC).UnixMicro())

	cases := append(costMixes[:len(costMixes):len(costMixes)], struct {
		name   string
		limits []accounting.Limit
	}{"zoned3", zonedLimits(t)})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := len(tc.limits)
			req := costRequests(tc.limits)[0]
			// The first lifecycle creates the counters.
			req.ID = "create-" + tc.name
			res, err := s.Reserve(ctx, req)
			if err != nil || !res.Admitted {
				t.Fatalf("reserve: admitted %v, err %v", res.Admitted, err)
			}
			if err := s.Settle(ctx, settleFor(req, res)); err != nil {
				t.Fatal(err)
			}

			req.ID = "count-" + tc.name
			var settle accounting.SettleRequest
			got := commandsOf(t, admin, func() {
				res, err := s.Reserve(ctx, req)
				if err != nil || !res.Admitted {
					t.Fatalf("reserve: admitted %v, err %v", res.Admitted, err)
				}
				settle = settleFor(req, res)
			})
			want := map[string]int64{"fcall": 1, "mget": 1, "set": 1, "setrange": int64(n)}
			if !maps.Equal(got, want) {
				t.Errorf("tw_reserve on %d counters ran %v, want %v", n, got, want)
			}
			got = commandsOf(t, admin, func() {
				if err := s.Settle(ctx, settle); err != nil {
					t.Fatal(err)
				}
			})
			want = map[string]int64{"fcall": 1, "getdel": 1, "mget": 1, "setrange": int64(n)}
			if !maps.Equal(got, want) {
				t.Errorf("tw_settle on %d counters ran %v, want %v", n, got, want)
			}
		})
	}
}

// commandsOf resets Redis's statistics, runs op, and returns how many
// times each command ran (INFO commandstats, the commands a function
// runs included), leaving out the INFO and CONFIG calls themselves.
func commandsOf(t *testing.T, admin *redis.Client, op func()) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	op()
	info, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd || name == "info" || strings.HasPrefix(name, "config") {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("commandstats %q: %v", line, err)
				}
				got[name] = n
			}
		}
	}
	if len(got) == 0 {
		t.Fatal("no commands counted")
	}
	return got
}
