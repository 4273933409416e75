package config

import (
	"cmp"
	"slices"
	"strings"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// Error is every problem of a config file, one [accounting.FieldError]
// each, sorted by field (indexes in numeric order), so that the same file
// always gives the same report.
type Error struct {
	Problems []*accounting.FieldError
}

// Error returns one line per problem: "config: limits[2].window: …".
func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("config: ")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Unwrap returns the problems, for errors.As and errors.Is.
func (e *Error) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

// problems collects what is wrong with a file while it is read.
type problems struct {
	// file are the problems of the file itself: its shape, its own
	// settings, names it cannot resolve.
	file []*accounting.FieldError
	// lib are the libraries' verdicts on the options the file gave.
	lib []*accounting.FieldError
	// shadow are fields whose library verdicts would only repeat a
	// problem of the file: a value the file did not give in a usable
	// form reaches the library as a zero, which it rejects again.
	shadow []string
}

// add records a problem of the file at field.
func (p *problems) add(field, format string, args ...any) {
	p.file = append(p.file, accounting.FieldErrorf(field, format, args...))
	p.shadow = append(p.shadow, field)
}

// skip records fields the file could not give (as they depend on one it
// got wrong), whose library verdicts are therefore beside the point.
func (p *problems) skip(fields ...string) { p.shadow = append(p.shadow, fields...) }

// library records a library's verdict, a joined list of FieldErrors.
func (p *problems) library(err error) {
	// PrefixFields flattens err into FieldErrors, joined.
	joined, ok := accounting.PrefixFields("", err).(interface{ Unwrap() []error })
	if !ok {
		return
	}
	for _, e := range joined.Unwrap() {
		if fe, ok := e.(*accounting.FieldError); ok {
			p.lib = append(p.lib, fe)
		}
	}
}

// err returns nil or an *Error with every problem: the file's, and the
// libraries' that no problem of the file shadows.
func (p *problems) err() error {
	all := slices.Clone(p.file)
	for _, e := range p.lib {
		if !slices.ContainsFunc(p.shadow, func(s string) bool { return within(e.Field, s) }) {
			all = append(all, e)
		}
	}
	if len(all) == 0 {
		return nil
	}
	slices.SortStableFunc(all, func(a, b *accounting.FieldError) int { return compareFields(a.Field, b.Field) })
	return &Error{Problems: all}
}

// within reports whether field is path or lies under it.
func within(field, path string) bool {
	rest, ok := strings.CutPrefix(field, path)
	return ok && (rest == "" || rest[0] == '.' || rest[0] == '[')
}

// compareFields orders field names as text, except that runs of digits
// compare as numbers: limits[2] before limits[10].
func compareFields(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb)); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

// digits returns the length of the run of ASCII digits s starts with.
func digits(s string) int {
	n := 0
	for n < len(s) && '0' <= s[n] && s[n] <= '9' {
		n++
	}
	return n
}
