package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository root, relative to this package.
const root = ".."

// markdownFiles returns the documentation: the top-level *.md files and
// docs/*.md, as paths relative to root.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"*.md", "docs/*.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			rel, _ := filepath.Rel(root, f)
			files = append(files, rel)
		}
	}
	if len(files) < 3 {
		t.Fatalf("found only %v", files)
	}
	return files
}

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// prose returns a Markdown text without its fenced code blocks, whose
// lines are neither links nor headings.
func prose(md string) string {
	var b strings.Builder
	fenced := false
	for line := range strings.Lines(md) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			b.WriteString(line)
		}
	}
	return b.String()
}

var (
	linkRE     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE  = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	codeSpanRE = regexp.MustCompile("`([^`\n]+)`")
)

// anchor is GitHub's anchor for a heading: lower case, punctuation other
// than '-' and '_' dropped, spaces turned into '-'.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func TestAnchor(t *testing.T) {
	cases := map[string]string{
		"Try it: the local demo":                   "try-it-the-local-demo",
		"`completions` without `max_tokens`":       "completions-without-max_tokens",
		"Integration: Envoy, Istio, Envoy Gateway": "integration-envoy-istio-envoy-gateway",
		"`request_body_mode: BUFFERED`":            "request_body_mode-buffered",
	}
	for heading, want := range cases {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q): got %q, want %q", heading, got, want)
		}
	}
}

// anchors returns the anchors of a Markdown file's headings.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	for _, m := range headingRE.FindAllStringSubmatch(prose(md), -1) {
		out[anchor(strings.TrimSpace(m[1]))] = true
	}
	return out
}

// TestLinks checks every relative link in the documentation: the file
// exists, and a #fragment names a heading of the file it points to.
func TestLinks(t *testing.T) {
	for _, f := range markdownFiles(t) {
		md := read(t, f)
		for _, m := range linkRE.FindAllStringSubmatch(prose(md), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			dest := f
			if file != "" {
				dest = filepath.Join(filepath.Dir(f), file)
				if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
					t.Errorf("%s: link %q: %v", f, target, err)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s: link %q: a fragment into a file that is not Markdown", f, target)
				continue
			}
			if !anchors(read(t, dest))[frag] {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", f, target, dest, frag)
			}
		}
	}
}

// mdNameRE matches a Markdown document's file name.
var mdNameRE = regexp.MustCompile(`\b[A-Za-z0-9_-]+\.md\b`)

// TestNoReferenceOutsideTheRepository checks no document, config or
// comment of the repository names a file that is not in it: every
// Markdown document it names (a design note, a protocol summary kept
// elsewhere) must be one the repository has, and every repository path
// (in backquotes in the documentation) must exist. What is checked is the
// prose: Markdown outside fenced blocks (a shell line may write a report
// of its own), and the comments of Go files (a Go string may name another
// tree's files as data, as the tokenizer's corpus reads Go's own docs).
func TestNoReferenceOutsideTheRepository(t *testing.T) {
	have := map[string]bool{}
	var texts []struct{ path, text string }
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		ext := filepath.Ext(p)
		if ext == ".md" {
			have[d.Name()] = true
		}
		switch ext {
		case ".go", ".md", ".yaml", ".yml", ".json", ".sh", ".lua":
		default:
			if d.Name() != "Dockerfile" {
				return nil
			}
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		text := string(b)
		switch ext {
		case ".md":
			text = prose(text)
		case ".go":
			text = goComments(t, p, b)
		}
		texts = append(texts, struct{ path, text string }{p, text})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range texts {
		for _, name := range mdNameRE.FindAllString(f.text, -1) {
			if !have[name] {
				t.Errorf("%s names %s, which is not in the repository", f.path, name)
			}
		}
	}

	repoPath := regexp.MustCompile(`^(\.ci|accounting|cmd|deploy|docs|envoy|extproc|internal|testdata)/[A-Za-z0-9_./-]*$`)
	for _, f := range markdownFiles(t) {
		for _, m := range codeSpanRE.FindAllStringSubmatch(prose(read(t, f)), -1) {
			p := m[1]
			if !repoPath.MatchString(p) {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("%s names `%s`, which does not exist", f, p)
			}
		}
	}
}

// TestPackageTable checks the README's package table against the module:
// every package go list reports is in the table, and every package the
// table names exists.
func TestPackageTable(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	cmd := exec.Command("go", "list", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/tokenwarden/tokenwarden"
	var pkgs []string
	for line := range strings.Lines(string(out)) {
		p := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(line), module), "/")
		if p != "" {
			pkgs = append(pkgs, p)
		}
	}

	readme := read(t, "README.md")
	start := strings.Index(readme, "| package | what lives there |")
	if start < 0 {
		t.Fatal("README.md: no package table (| package | what lives there |)")
	}
	table := map[string]bool{}
	for line := range strings.Lines(readme[start:]) {
		if !strings.HasPrefix(line, "|") {
			break
		}
		first := strings.SplitN(line, "|", 3)[1]
		for _, m := range codeSpanRE.FindAllStringSubmatch(first, -1) {
			table[strings.TrimSuffix(m[1], "/")] = true
		}
	}
	for _, p := range pkgs {
		if !table[p] {
			t.Errorf("package %s is missing from the README's package table", p)
		}
	}
	for p := range table {
		if slices.Contains(pkgs, p) {
			continue
		}
		if st, err := os.Stat(filepath.Join(root, p)); err != nil || !st.IsDir() {
			t.Errorf("the README's package table names %s, which is neither a package nor a directory", p)
		}
	}
}

// configurationDoc is the configuration reference.
const configurationDoc = "docs/configuration.md"

// TestConfigurationExampleIsAccepted runs tokenwarden check-config on the
// complete example of the configuration reference.
func TestConfigurationExampleIsAccepted(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	md := read(t, configurationDoc)
	i := strings.Index(md, "## A complete example")
	if i < 0 {
		t.Fatalf("%s: no section \"A complete example\"", configurationDoc)
	}
	rest := md[i:]
	open := strings.Index(rest, "```yaml\n")
	if open < 0 {
		t.Fatalf("%s: the complete example has no yaml block", configurationDoc)
	}
	body := rest[open+len("```yaml\n"):]
	body = body[:strings.Index(body, "```")]
	file := filepath.Join(t.TempDir(), "tokenwarden.yaml")
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", "./cmd/tokenwarden", "check-config", "-config", file)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tokenwarden check-config on the example: %v\n%s", err, out)
	}
}

// configDir is where the config file's Go types live.
const configDir = "config"

// TestConfigurationKeysDocumented checks the configuration reference names
// every key of the config file. The keys come from the yaml tags of the
// Config type in cmd/tokenwarden, followed into every struct it holds; a
// key is documented when a code span of the reference spells its path
// (map keys written <name>, list items []).
func TestConfigurationKeysDocumented(t *testing.T) {
	keys := configKeys(t)
	if len(keys) < 40 {
		t.Fatalf("found only %d config keys in %s: %v", len(keys), configDir, keys)
	}
	documented := map[string]bool{}
	for _, m := range codeSpanRE.FindAllStringSubmatch(read(t, configurationDoc), -1) {
		documented[normalizeKey(m[1])] = true
	}
	for _, k := range keys {
		if !documented[k] {
			t.Errorf("%s does not document the config key %s", configurationDoc, k)
		}
	}
}

var placeholderRE = regexp.MustCompile(`\.<[^>]*>`)

// normalizeKey drops map-key placeholders and list markers from a
// documented key path: limits[].name → limits.name,
// models.<model>.input → models.input.
func normalizeKey(s string) string {
	return strings.ReplaceAll(placeholderRE.ReplaceAllString(s, ""), "[]", "")
}

// configKeys returns the paths of every leaf key of the Config type.
func configKeys(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	structs := map[string]*ast.StructType{}
	files, err := filepath.Glob(filepath.Join(root, configDir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if st, ok := ts.Type.(*ast.StructType); ok {
					structs[ts.Name.Name] = st
				}
			}
			return true
		})
	}
	if structs["file"] == nil {
		t.Fatalf("no type file in %s: point configDir at where the config file's types live", configDir)
	}
	var keys []string
	var walk func(st *ast.StructType, prefix string, depth int)
	walk = func(st *ast.StructType, prefix string, depth int) {
		if depth > 10 {
			t.Fatalf("config types nest deeper than 10 at %s", prefix)
		}
		for _, f := range st.Fields.List {
			if f.Tag == nil {
				continue
			}
			tag, _ := strconv.Unquote(f.Tag.Value)
			name, _, _ := strings.Cut(reflect.StructTag(tag).Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			path := name
			if prefix != "" {
				path = prefix + "." + name
			}
			if inner := structOf(f.Type, structs); inner != nil {
				walk(inner, path, depth+1)
				continue
			}
			keys = append(keys, path)
		}
	}
	walk(structs["file"], "", 0)
	slices.Sort(keys)
	return keys
}

// structOf returns the struct type a field holds, through pointers, slices
// and map values, or nil for a leaf.
func structOf(e ast.Expr, structs map[string]*ast.StructType) *ast.StructType {
	switch x := e.(type) {
	case *ast.StarExpr:
		return structOf(x.X, structs)
	case *ast.ArrayType:
		return structOf(x.Elt, structs)
	case *ast.MapType:
		return structOf(x.Value, structs)
	case *ast.Ident:
		return structs[x.Name]
	case *ast.StructType:
		return x
	}
	return nil
}

// goComments returns the comments of the Go file at path, one after
// another.
func goComments(t *testing.T, path string, src []byte) string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var b strings.Builder
	for _, g := range f.Comments {
		b.WriteString(g.Text())
		b.WriteByte('\n')
	}
	return b.String()
}
