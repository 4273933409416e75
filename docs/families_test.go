package docs

import (
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/extproc"
)

// TestUnmeteredFamiliesDocumented: every unmetered API family the server
// knows is named in the configuration reference (the keys of
// unmetered_apis) and in SECURITY.md's table of path families, and
// neither names one it does not know.
func TestUnmeteredFamiliesDocumented(t *testing.T) {
	known := map[string]bool{}
	for _, f := range extproc.UnmeteredFamilies() {
		known[f] = true
	}
	for _, doc := range []string{configurationDoc, "SECURITY.md"} {
		md := read(t, doc)
		for f := range known {
			if !strings.Contains(md, "`"+f+"`") {
				t.Errorf("%s does not name the unmetered family %s", doc, f)
			}
		}
	}
	// The reference's list of families, in the unmetered_apis row.
	md := read(t, configurationDoc)
	i := strings.Index(md, "| `unmetered_apis.<family>` |")
	if i < 0 {
		t.Fatalf("%s: no unmetered_apis row", configurationDoc)
	}
	row := md[i : i+strings.IndexByte(md[i:], '\n')]
	_, list, _ := strings.Cut(row, "The families: ")
	list, _, _ = strings.Cut(list, ";")
	for _, name := range strings.Split(list, ", ") {
		if name = strings.Trim(name, "` "); !known[name] {
			t.Errorf("%s names %q among the unmetered families: the server knows no such family", configurationDoc, name)
		}
	}
}
