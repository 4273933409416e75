package accounting

import (
	"errors"
	"fmt"
	"strings"
)

// FieldError is an invalid option, named by its key in tokenwarden's
// config file: "window" for a [Limit]'s, "limits[2].window" for one of
// [Options], "url" for a Redis store's. Naming options as the file does
// lets the file's author find the line, and an embedder who builds the
// options in code read the name as the field it belongs to.
//
// Every Validate of the public packages reports all the problems it
// finds, each a FieldError, joined with [errors.Join]; a loader that
// knows where the options sit in its file moves them there with
// [PrefixFields].
type FieldError struct {
	// Field is the option's key, a dotted path with bracketed indexes.
	Field string
	Err   error
}

// FieldErrorf returns a FieldError for field whose Err is
// fmt.Errorf(format, args...).
func FieldErrorf(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Err.Error()
	}
	return e.Field + ": " + e.Err.Error()
}

func (e *FieldError) Unwrap() error { return e.Err }

// PrefixFields returns err with every FieldError in it moved under
// prefix: "window" under "limits[2]" becomes "limits[2].window", "[0]"
// under "scope" becomes "scope[0]". An error in err that names no field
// becomes a FieldError naming prefix itself. Joined errors are returned
// joined, flattened to one level, in order; nil stays nil.
func PrefixFields(prefix string, err error) error {
	if err == nil {
		return nil
	}
	var out []error
	for _, leaf := range leaves(err, nil) {
		fe, ok := leaf.(*FieldError)
		if !ok {
			fe = &FieldError{Err: leaf}
		}
		out = append(out, &FieldError{Field: joinField(prefix, fe.Field), Err: fe.Err})
	}
	return errors.Join(out...)
}

// leaves appends the errors err joins, recursively, or err itself.
func leaves(err error, to []error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if e != nil {
				to = leaves(e, to)
			}
		}
		return to
	}
	return append(to, err)
}

func joinField(prefix, field string) string {
	switch {
	case prefix == "":
		return field
	case field == "":
		return prefix
	case strings.HasPrefix(field, "["):
		return prefix + field
	}
	return prefix + "." + field
}
