package localrun

import "testing"

func TestDeclaresModule(t *testing.T) {
	cases := []struct {
		name  string
		gomod string
		want  bool
	}{
		{"this module", "module github.com/tokenwarden/tokenwarden\n\ngo 1.26\n", true},
		{"another module", "module example.com/other\n", false},
		{"a prefix of another", "module github.com/tokenwarden/tokenwarden/v2\n", false},
		{"empty", "", false},
	}
	for _, c := range cases {
		if got := declaresModule([]byte(c.gomod)); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}
