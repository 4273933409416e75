package config

import (
	"errors"
	"os"
	"testing"
)

// FuzzParse: whatever the bytes, Parse returns without panicking, gives
// the same answer twice, names a field in every problem it lists in
// order, and returns only options the libraries accept.
func FuzzParse(f *testing.F) {
	seeds := append(shippedConfigs(), "../cmd/tokenwarden/default.yaml")
	for _, path := range seeds {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(baseConfig + "limits:\n  - &l {name: a, dimension: cost, limit: 1.5, window: 7d}\n  - {<<: *l, name: b}\n"))
	f.Add([]byte("store: {type: redis, redis: {cluster_addrs: [a], sentinel: {master_name: m}}}\nlimits: [{}, {name: x}]\n"))
	f.Add([]byte("a: &a [*a]\nlisten: *a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		_, again := Parse(data)
		if (err == nil) != (again == nil) || (err != nil && err.Error() != again.Error()) {
			t.Fatalf("two answers for one file:\n%v\n%v", err, again)
		}
		var perr *Error
		if errors.As(err, &perr) {
			for i, p := range perr.Problems {
				if p.Field == "" {
					t.Errorf("problem %q names no field", p)
				}
				if i > 0 && compareFields(perr.Problems[i-1].Field, p.Field) > 0 {
					t.Errorf("problems out of order: %q before %q", perr.Problems[i-1].Field, p.Field)
				}
			}
		}
		if err != nil {
			return
		}
		if err := c.Accounting.Validate(); err != nil {
			t.Errorf("Parse accepted accounting options that Validate refuses: %v", err)
		}
		if err := c.Server.Validate(); err != nil {
			t.Errorf("Parse accepted server options that Validate refuses: %v", err)
		}
		if c.Store.Redis != nil {
			if err := c.Store.Redis.Validate(); err != nil {
				t.Errorf("Parse accepted Redis options that Validate refuses: %v", err)
			}
		}
		if c.Server.Counter == nil {
			t.Errorf("Parse returned no counter")
		}
	})
}
