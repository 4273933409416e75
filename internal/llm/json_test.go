package llm

import (
	"testing"

	"github.com/tidwall/gjson"
)

func TestOptionalFields(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want bool
		err  bool
	}{
		{``, false, false}, {`null`, false, false}, {`true`, true, false}, {`false`, false, false},
		{`"true"`, false, true}, {`1`, false, true}, {`{}`, false, true},
	} {
		got, err := OptionalBool(gjson.Parse(tc.raw), "stream")
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("OptionalBool(%s): got %v, %v; want %v, error %v", tc.raw, got, err, tc.want, tc.err)
		}
	}
	for _, tc := range []struct {
		raw string
		err bool
	}{{``, false}, {`null`, false}, {`{}`, false}, {`[]`, true}, {`5`, true}, {`"x"`, true}} {
		if err := OptionalObject(gjson.Parse(tc.raw), "stream_options"); (err != nil) != tc.err {
			t.Errorf("OptionalObject(%s): got %v, want error %v", tc.raw, err, tc.err)
		}
	}
	for _, tc := range []struct {
		raw, want string
		err       bool
	}{{``, "", false}, {`null`, "", false}, {`"x"`, "x", false}, {`1`, "", true}} {
		got, err := OptionalString(gjson.Parse(tc.raw), "effort")
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("OptionalString(%s): got %q, %v", tc.raw, got, err)
		}
	}
	if _, err := RequiredString(gjson.Parse(`""`), "model"); err == nil {
		t.Error("RequiredString: got no error for an empty string")
	}
	if got, err := RequiredString(gjson.Parse(`"m"`), "model"); got != "m" || err != nil {
		t.Errorf("RequiredString: got %q, %v", got, err)
	}
}
