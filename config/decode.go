package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// maxNodes bounds the values a file may hold, counting each use of an
// alias anew: aliases repeat nodes without repeating their text, so a
// small file could otherwise make reading it take as long as its author
// likes. A real config holds a few thousand.
const maxNodes = 100_000

// errTooManyNodes stops a decode that passed maxNodes.
var errTooManyNodes = fmt.Errorf("the file holds more than %d values (aliases count each time they are used)", maxNodes)

// decoder fills a file's struct from its YAML nodes strictly: a key the
// struct does not have, a key given twice, a value of the wrong shape or
// type is each an error naming its path (limits[2].windw), and every one
// is reported, not just the first. Values are read as yaml.v3 reads them
// (aliases and merge keys included).
type decoder struct {
	errs  []*accounting.FieldError
	nodes int
}

// decode reads data into v, a pointer to a struct with yaml tags. The
// error is for a file that is not YAML, or not a mapping, or too large;
// problems of single values are returned, v holding the rest.
func decode(data []byte, v any) ([]*accounting.FieldError, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		return nil, errors.New("the file is empty")
	}
	root := resolveAlias(doc.Content[0])
	if root.Kind != yaml.MappingNode {
		return nil, errors.New("the file is not a mapping of options")
	}
	d := &decoder{}
	if err := d.value(root, reflect.ValueOf(v).Elem(), ""); err != nil {
		return nil, err
	}
	return d.errs, nil
}

func (d *decoder) fail(path, format string, args ...any) {
	d.errs = append(d.errs, accounting.FieldErrorf(path, format, args...))
}

// value decodes n into v, which is named path.
func (d *decoder) value(n *yaml.Node, v reflect.Value, path string) error {
	if d.nodes++; d.nodes > maxNodes {
		return errTooManyNodes
	}
	n = resolveAlias(n)
	if isNull(n) {
		// As yaml.v3 does: null leaves a pointer, map or slice nil and
		// anything else its zero value.
		v.Set(reflect.Zero(v.Type()))
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		if err := d.value(n, p.Elem(), path); err != nil {
			return err
		}
		v.Set(p)
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.fail(path, "must be a mapping, not %s", describe(n))
			return nil
		}
		return d.mapping(n, path, func(key string, val *yaml.Node) error {
			f, ok := fieldByTag(v, key)
			if !ok {
				d.fail(joinPath(path, key), "unknown field")
				return nil
			}
			return d.value(val, f, joinPath(path, key))
		})
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.fail(path, "must be a mapping, not %s", describe(n))
			return nil
		}
		m := reflect.MakeMap(v.Type())
		err := d.mapping(n, path, func(key string, val *yaml.Node) error {
			e := reflect.New(v.Type().Elem()).Elem()
			if err := d.value(val, e, joinPath(path, key)); err != nil {
				return err
			}
			m.SetMapIndex(reflect.ValueOf(key), e)
			return nil
		})
		v.Set(m)
		return err
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(path, "must be a list, not %s", describe(n))
			return nil
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, e := range n.Content {
			if err := d.value(e, s.Index(i), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		v.Set(s)
	default:
		if n.Kind != yaml.ScalarNode {
			d.fail(path, "must be %s, not %s", kindName(v.Kind()), describe(n))
			return nil
		}
		if isInt(v.Kind()) && n.ShortTag() == "!!float" {
			// yaml.v3 would cut 2.5 to 2 without a word: a count is
			// whole, and a fraction in one is a mistake to report.
			var f float64
			if err := n.Decode(&f); err != nil || f != math.Trunc(f) {
				d.fail(path, "%s is not %s", describe(n), kindName(v.Kind()))
				return nil
			}
		}
		if err := n.Decode(v.Addr().Interface()); err != nil {
			d.fail(path, "%s is not %s", describe(n), kindName(v.Kind()))
		}
	}
	return nil
}

// isInt reports whether k is an integer kind.
func isInt(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// mapping calls each for every key of n and its value, merge keys ("<<")
// expanded as yaml.v3 expands them: the mapping's own keys win, then
// the merged mappings' in order. A key given twice is an error.
func (d *decoder) mapping(n *yaml.Node, path string, each func(key string, val *yaml.Node) error) error {
	seen := map[string]bool{}
	var merged []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, val)
			continue
		}
		key, ok := keyString(k)
		if !ok {
			d.fail(path, "has a key that is %s, not a name", describe(k))
			continue
		}
		if seen[key] {
			d.fail(joinPath(path, key), "given twice")
			continue
		}
		seen[key] = true
		if err := each(key, val); err != nil {
			return err
		}
	}
	for _, m := range merged {
		m = resolveAlias(m)
		sources := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			sources = m.Content
		}
		for _, src := range sources {
			if d.nodes++; d.nodes > maxNodes {
				return errTooManyNodes
			}
			src = resolveAlias(src)
			if src.Kind != yaml.MappingNode {
				d.fail(path, "merges %s; a merge key (<<) takes a mapping or a list of them", describe(src))
				continue
			}
			// The merged mapping's own keys, its merges included, go
			// through the same rules; keys already set here are skipped.
			err := d.mapping(src, path, func(key string, val *yaml.Node) error {
				if seen[key] {
					return nil
				}
				seen[key] = true
				return each(key, val)
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// fieldByTag returns v's field whose yaml tag is key.
func fieldByTag(v reflect.Value, key string) (reflect.Value, bool) {
	t := v.Type()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == key {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

func keyString(k *yaml.Node) (string, bool) {
	k = resolveAlias(k)
	if k.Kind != yaml.ScalarNode {
		return "", false
	}
	return k.Value, true
}

// resolveAlias follows n to the node it stands for. yaml.v3 resolves an
// alias only to an anchor defined before it, so the chain ends.
func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = resolveAlias(n)
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names a node for an error: a scalar by its value (cut short),
// anything else by its shape.
func describe(n *yaml.Node) string {
	n = resolveAlias(n)
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		s := n.Value
		if len(s) > 40 {
			s = s[:40] + "…"
		}
		return strconv.Quote(s)
	}
	return "a YAML node of kind " + fmt.Sprint(n.Kind)
}

func kindName(k reflect.Kind) string {
	switch k {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64:
		return "a whole number"
	case reflect.Float64:
		return "a number"
	}
	return "a single value"
}

// joinPath names a key of the mapping at path; an empty key is "".
func joinPath(path, key string) string {
	if key == "" {
		key = `""`
	}
	if path == "" {
		return key
	}
	return path + "." + key
}
