package llm

import (
	"fmt"
	"math"
	"strconv"
	"unsafe"

	"github.com/tidwall/gjson"
)

// View returns b as a string without copying, for gjson lookups whose
// results are used only while b is unchanged. Copying a megabyte request
// body just to read a few fields would be the biggest cost on the hot path.
func View(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// MaxOutputCap is the largest output cap a request may name. Larger (and
// 1e309, which is +Inf as a float) is refused rather than clamped: a cap
// the limiter cannot represent must not slip through as a small number.
const MaxOutputCap = 1<<31 - 1

// PositiveInt reads an optional positive integer field, such as an output
// cap: absent or null gives ok false; anything but a JSON integer in
// 1..max is an error naming the field.
func PositiveInt(r gjson.Result, field string, maxValue int64) (v int64, ok bool, err error) {
	switch r.Type {
	case gjson.Null:
		return 0, false, nil
	case gjson.Number:
	default:
		return 0, false, fmt.Errorf("%s must be an integer, got %s", field, truncate(r.Raw, 32))
	}
	n, perr := strconv.ParseInt(r.Raw, 10, 64)
	if perr != nil {
		if f := r.Num; f == math.Trunc(f) && !math.IsInf(f, 0) && f >= 1 && f <= float64(maxValue) && !hasFraction(r.Raw) {
			// 1e3 is an integer written with an exponent.
			return int64(f), true, nil
		}
		return 0, false, fmt.Errorf("%s must be an integer between 1 and %d, got %s", field, maxValue, truncate(r.Raw, 32))
	}
	if n < 1 || n > maxValue {
		return 0, false, fmt.Errorf("%s must be between 1 and %d, got %s", field, maxValue, truncate(r.Raw, 32))
	}
	return n, true, nil
}

func hasFraction(raw string) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] == '.' {
			return true
		}
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// OptionalBool reads an optional flag, such as "stream": absent or null is
// false; anything but a JSON boolean is an error naming the field. A
// string such as "true" is refused rather than read: Python providers
// coerce it to a boolean, Go ones refuse it, and gjson's Bool would read
// "1" and "t" as true as well.
func OptionalBool(r gjson.Result, field string) (bool, error) {
	switch r.Type {
	case gjson.Null:
		return false, nil
	case gjson.True:
		return true, nil
	case gjson.False:
		return false, nil
	}
	return false, fmt.Errorf("%s must be a boolean, got %s", field, truncate(r.Raw, 32))
}

// OptionalObject checks an optional object field, such as an options
// object the wire format may edit: absent, null or an object.
func OptionalObject(r gjson.Result, field string) error {
	if r.Type == gjson.Null || r.IsObject() {
		return nil
	}
	return fmt.Errorf("%s must be an object, got %s", field, truncate(r.Raw, 32))
}

// OptionalString reads an optional string field: absent or null is "";
// anything but a JSON string is an error naming the field.
func OptionalString(r gjson.Result, field string) (string, error) {
	switch r.Type {
	case gjson.Null:
		return "", nil
	case gjson.String:
		return r.Str, nil
	}
	return "", fmt.Errorf("%s must be a string, got %s", field, truncate(r.Raw, 32))
}

// RequiredString reads a string field that must be present and not empty,
// such as a model.
func RequiredString(r gjson.Result, field string) (string, error) {
	if r.Type != gjson.String || r.Str == "" {
		return "", fmt.Errorf("%s must be a non-empty string", field)
	}
	return r.Str, nil
}
