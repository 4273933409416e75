package llm

import (
	"strconv"
	"testing"

	"github.com/tidwall/gjson"
)

// topNames are the top-level fields the CheckTop tests ask for: some
// present in the cases, some not, one escaped in a case.
var topNames = []string{"model", "messages", "stream", "max_tokens", "c", "missing", "a", "b", "x"}

// TestCheckTop: CheckTop returns the errors of CheckBody and the fields
// of TopFields, whatever the values and the space around them.
func TestCheckTop(t *testing.T) {
	bodies := []string{
		`{}`,
		` {"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":5} `,
		"\n\t{ \"model\" : \"m\\u00e9\" , \"messages\" : [ ] , \"stream\" : false , \"\\u0063\" : null }\n",
		`{"nested":{"model":"no"},"a":{"b":1},"b":-1.5e3,"x":"\"quoted\""}`,
		`{"model":1,"model":2}`,
		`{"MODEL":"m"}`,
		`{"a":[1,2}`,
		`[]`,
	}
	for _, b := range bodies {
		if diff := compareTop([]byte(b), topNames); diff != "" {
			t.Errorf("%s: %s", b, diff)
		}
	}
	// More names than the checker holds.
	var many []string
	for i := range maxTopNames + 2 {
		many = append(many, "f"+strconv.Itoa(i))
	}
	if diff := compareTop([]byte(`{"f0":0,"f17":17}`), many); diff != "" {
		t.Error(diff)
	}
}

// FuzzCheckTop holds CheckTop to CheckBody and TopFields.
func FuzzCheckTop(f *testing.F) {
	for _, b := range requestFixtures(f) {
		f.Add(b)
	}
	for _, c := range eachCases {
		f.Add([]byte(`{"x":` + c + `,"model":"m"}`))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if diff := compareTop(body, topNames); diff != "" {
			t.Fatal(diff)
		}
	})
}

func compareTop(body []byte, names []string) string {
	got, err := CheckTop(body, checkFields, nil, names...)
	wantErr := CheckBody(body, checkFields)
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		return "got error " + errString(err) + ", want " + errString(wantErr)
	}
	if err != nil {
		return ""
	}
	want := TopFields(gjson.ParseBytes(body), nil, names...)
	for k := range names {
		if d := diffResult(got[k], want[k]); d != "" {
			return names[k] + ": " + d
		}
	}
	return ""
}

func errString(err error) string {
	if err == nil {
		return "none"
	}
	return strconv.Quote(err.Error())
}
