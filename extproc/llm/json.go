package llm

import (
	"errors"
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

// ErrNotObject is returned for a body that is valid JSON but not an object.
var ErrNotObject = errors.New("request body must be a JSON object")

// ValidObject checks that body is a JSON object; gjson itself skips over
// malformed input, so the body is validated once before it is read.
func ValidObject(body []byte) error {
	if !gjson.ValidBytes(body) {
		return errors.New("request body is not valid JSON")
	}
	for _, c := range body {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return nil
		}
		break
	}
	return ErrNotObject
}

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
