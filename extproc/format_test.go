package extproc

import (
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// TestAppendDuration: appendDuration renders what time.Duration's String
// does, at every magnitude and precision.
func TestAppendDuration(t *testing.T) {
	for _, d := range []time.Duration{0, 1, 999, time.Microsecond, 1500 * time.Nanosecond, 999999,
		time.Millisecond, 120 * time.Millisecond, 1500 * time.Microsecond, time.Second - 1, time.Second,
		1500 * time.Millisecond, 59*time.Second + 999*time.Millisecond, time.Minute, 6 * time.Minute,
		time.Hour, time.Hour + time.Nanosecond, 26*time.Hour + 3*time.Minute + 4*time.Second + 5*time.Millisecond,
		-1, -time.Minute - time.Millisecond, math.MaxInt64, math.MinInt64} {
		checkDuration(t, d)
	}
}

func checkDuration(t *testing.T, d time.Duration) {
	t.Helper()
	if got, want := string(appendDuration([]byte("x"), d)), "x"+d.String(); got != want {
		t.Errorf("%d: got %q, want %q", int64(d), got, want)
	}
}

func FuzzAppendDuration(f *testing.F) {
	f.Add(int64(6 * time.Minute))
	f.Add(int64(1234567))
	f.Fuzz(func(t *testing.T, d int64) { checkDuration(t, time.Duration(d)) })
}

// FuzzAppendDecimal holds appendDecimal to strconv.
func FuzzAppendDecimal(f *testing.F) {
	for _, u := range []uint64{0, 9, 10, 99, 100, 101, 999, 1000, 30_000_000, math.MaxUint64} {
		f.Add(u)
	}
	f.Fuzz(func(t *testing.T, u uint64) {
		if got, want := string(appendDecimal([]byte("x"), u)), "x"+strconv.FormatUint(u, 10); got != want {
			t.Fatalf("appendDecimal(%d): got %q, want %q", u, got, want)
		}
	})
}

func TestAppendAmount(t *testing.T) {
	for _, tc := range []struct {
		d    accounting.Dimension
		v    int64
		want string
	}{
		{accounting.Tokens, 0, "0"},
		{accounting.Tokens, -42, "-42"},
		{accounting.Requests, math.MaxInt64, "9223372036854775807"},
		{accounting.Cost, 0, "0.000000"},
		{accounting.Cost, 1234567, "1.234567"},
		{accounting.Cost, 5, "0.000005"},
		{accounting.Cost, -5, "-0.000005"},
		{accounting.Cost, math.MinInt64, "-9223372036854.775808"},
	} {
		if got := string(appendAmount([]byte("x"), tc.d, tc.v)); got != "x"+tc.want {
			t.Errorf("%v %d: got %q, want %q", tc.d, tc.v, got, "x"+tc.want)
		}
		if got := formatAmount(tc.d, tc.v); got != tc.want {
			t.Errorf("formatAmount(%v, %d): got %q, want %q", tc.d, tc.v, got, tc.want)
		}
	}
}

// TestRateLimitHeadersExtremes: the largest values of every dimension
// fit their entries, and each header keeps its own value.
func TestRateLimitHeadersExtremes(t *testing.T) {
	var dims [numDims]accounting.DimState
	for i := range dims {
		dims[i] = accounting.DimState{Applied: true, Limit: math.MaxInt64, Remaining: math.MinInt64, Reset: math.MaxInt64}
	}
	got := map[string]string{}
	for _, h := range rateLimitHeaders(&dims, nil) {
		got[h.GetHeader().GetKey()] = string(h.GetHeader().GetRawValue())
	}
	for i := range dims {
		d := accounting.Dimension(i)
		for k, want := range []string{formatAmount(d, math.MaxInt64), formatAmount(d, 0), formatReset(math.MaxInt64)} {
			if name := headerNames[i][k]; got[name] != want {
				t.Errorf("%s: got %q, want %q", name, got[name], want)
			}
		}
	}
}

// FuzzAppendAmount holds appendAmount to strconv's and fmt's renderings:
// integers as strconv.FormatInt, cost as a sign, the whole dollars and
// six decimals.
func FuzzAppendAmount(f *testing.F) {
	for _, v := range []int64{0, 9, 10, 99, 100, 999999, 1000000, -1, math.MaxInt64, math.MinInt64} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v int64) {
		if got, want := string(appendAmount([]byte("x"), accounting.Tokens, v)), "x"+strconv.FormatInt(v, 10); got != want {
			t.Errorf("tokens %d: got %q, want %q", v, got, want)
		}
		u, sign := uint64(v), ""
		if v < 0 {
			u, sign = -u, "-"
		}
		want := fmt.Sprintf("x%s%d.%06d", sign, u/1e6, u%1e6)
		if got := string(appendAmount([]byte("x"), accounting.Cost, v)); got != want {
			t.Errorf("cost %d: got %q, want %q", v, got, want)
		}
	})
}
