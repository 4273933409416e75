package llm

import "testing"

// TestCaptureGetOnce: GetOnce finds the top-level field where Get does,
// and reports a field there twice.
func TestCaptureGetOnce(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       string
		once       bool
	}{
		{"a body", `{"id":"x","usage":{"a":1}}`, `{"a":1}`, true},
		{"whitespace around it", "\r\n {\"usage\":{\"a\":1}}\n", `{"a":1}`, true},
		{"a byte order mark", "\xef\xbb\xbf{\"usage\":{\"a\":1}}", `{"a":1}`, true},
		{"a byte order mark, the field twice", "\xef\xbb\xbf{\"usage\":{\"a\":1},\"usage\":{\"a\":0}}", `{"a":1}`, false},
		{"the field twice", `{"usage":{"a":1},"usage":{"a":0}}`, `{"a":1}`, false},
		{"the field nested", `{"x":{"usage":{"a":0}},"usage":{"a":1}}`, `{"a":1}`, true},
		{"the field in a string", `{"x":"\"usage\":{}","usage":{"a":1}}`, `{"a":1}`, true},
		{"an array", `[{"usage":{"a":1}}]`, ``, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCapture(0)
			c.Write([]byte(tc.body))
			got, once := c.GetOnce("usage")
			if got.Raw != tc.want || once != tc.once {
				t.Errorf("got %q %v, want %q %v", got.Raw, once, tc.want, tc.once)
			}
			if get := c.Get("usage"); tc.once && get.Raw != got.Raw {
				t.Errorf("Get found %q, GetOnce %q", get.Raw, got.Raw)
			}
		})
	}
}
