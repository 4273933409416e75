package llm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// explained runs count on a Tally that explains itself and returns the
// parts, one "name tokens (detail)" a line, and the total.
func explained(count func(t *Tally) int64) (string, int64) {
	var lines []string
	t := NewTally(func(p Part) {
		line := fmt.Sprintf("%s %d", p.Name, p.Tokens)
		if p.Detail != "" {
			line += " (" + p.Detail + ")"
		}
		lines = append(lines, line)
	})
	total := count(&t)
	return strings.Join(lines, "\n"), total
}

func TestTally(t *testing.T) {
	msgs := gjson.Parse(`[{"role":"user"},{"type":"function_call"},{},{"role":"a \"b\"\nc"},{"role":"` + strings.Repeat("x", 100) + `"}]`)
	tests := []struct {
		name  string
		count func(t *Tally) int64
		want  string
		total int64
	}{
		{
			name: "parts of the request and of its elements",
			count: func(t *Tally) int64 {
				t.Add("tools", 20)
				msgs.ForEach(func(i, m gjson.Result) bool {
					outer := t.Enter("messages", int(i.Num), m)
					t.Overhead(3)
					t.Add("text", 5)
					t.Leave(outer)
					return true
				})
				t.Add("functions", 7)
				return t.Done("chat format overhead", "3 a message")
			},
			want: "tools 20\n" +
				"messages[0] user text 5\n" +
				"messages[1] function_call text 5\n" +
				"messages[2] text 5\n" +
				`messages[3] "a \"b\"\nc" text 5` + "\n" +
				`messages[4] "` + strings.Repeat("x", 64) + `"… text 5` + "\n" +
				"functions 7\n" +
				"chat format overhead 15 (3 a message)",
			total: 20 + 5*8 + 7,
		},
		{
			name: "within an element, and back",
			count: func(t *Tally) int64 {
				outer := t.Enter("messages", 2, msgs.Get("0"))
				inner := t.Within("tool_result")
				t.Add("text", 4)
				t.Leave(inner)
				t.Add("", 1)
				t.Leave(outer)
				t.Add("tools", 2)
				return t.Done("overhead", "")
			},
			want:  "messages[2] user tool_result text 4\nmessages[2] user 1\ntools 2",
			total: 7,
		},
		{
			name: "details",
			count: func(t *Tally) int64 {
				t.AddDetail("PDF", 1600, "%d bytes, a token per %d bytes", 3000, 10)
				t.AddDetail("constant", 1, "no figures")
				t.AddJSON("input_audio", 9)
				t.AddJSON("", 2)
				t.AddJSON("x y", 2)
				t.AddImage("image_url", 765, "high", 1024, 768)
				t.AddImage("image_url", 1445, "", 0, 0)
				return t.Done("overhead", "")
			},
			want: "PDF 1600 (3000 bytes, a token per 10 bytes)\n" +
				"constant 1 (no figures)\n" +
				"input_audio 9 (JSON text)\n" +
				"(untyped) 2 (JSON text)\n" +
				`"x y" 2 (JSON text)` + "\n" +
				"image_url 765 (detail high, 1024×768)\n" +
				"image_url 1445 (detail auto, size unknown)",
			total: 1600 + 1 + 9 + 2 + 2 + 765 + 1445,
		},
		{
			name: "nothing counted is not a part",
			count: func(t *Tally) int64 {
				t.Add("text", 0)
				t.AddJSON("x", 0)
				t.AddImage("image", 0, "low", 1, 1)
				return t.Done("overhead", "")
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, total := explained(tc.count)
			if got != tc.want {
				t.Errorf("got parts\n%s\nwant\n%s", got, tc.want)
			}
			if total != tc.total {
				t.Errorf("got total %d, want %d", total, tc.total)
			}
			// Unexplained, the same total.
			quiet := NewTally(nil)
			if n := tc.count(&quiet); n != tc.total {
				t.Errorf("unexplained: got total %d, want %d", n, tc.total)
			}
		})
	}
}

// TestTallyAllocs: a Tally that does not explain allocates nothing,
// whatever it is asked to name.
func TestTallyAllocs(t *testing.T) {
	m := gjson.Parse(`{"role":"user"}`)
	var total int64
	n := testing.AllocsPerRun(100, func() {
		tally := NewTally(nil)
		outer := tally.Enter("messages", 3, m)
		inner := tally.Within("tool_result")
		tally.Add("text", 1)
		tally.AddDetail("PDF", 2, "%d bytes", 3000)
		tally.AddJSON("input_audio", 3)
		tally.AddImage("image_url", 4, "high", 1024, 768)
		tally.Overhead(5)
		tally.Leave(inner)
		tally.Leave(outer)
		total = tally.Done("overhead", "")
	})
	if n != 0 {
		t.Errorf("got %.1f allocations, want 0", n)
	}
	if total != 15 {
		t.Errorf("got total %d, want 15", total)
	}
}
