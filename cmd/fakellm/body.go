package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
)

// Response headers that report what fakellm, as the provider, read from the
// request body. A test compares them with what tokenwarden metered: when the
// two disagree, the upstream would have generated something other than what
// was reserved.
const (
	// hdrSeenModel is the model the request was answered as: the body's
	// "model", or the model or deployment its path names.
	hdrSeenModel = "x-fakellm-seen-model"
	// hdrSeenMaxTokens is the output cap fakellm applied (max_tokens or the
	// API's equivalent), or "none".
	hdrSeenMaxTokens = "x-fakellm-seen-max-tokens"
)

// setSeen sets the hdrSeen* headers.
func setSeen(h http.Header, model string, outputCap *int) {
	h.Set(hdrSeenModel, model)
	if outputCap == nil {
		h.Set(hdrSeenMaxTokens, "none")
	} else {
		h.Set(hdrSeenMaxTokens, strconv.Itoa(*outputCap))
	}
}

// decodeBody unmarshals a JSON request body into v (a pointer to a struct),
// answering 400 when it is not a JSON object of the right types.
//
// It reads the body as the providers' back ends do (Python's json module and
// pydantic): keys match a field's name exactly, and of duplicate keys the
// last one wins. Go's encoding/json alone would differ on the first: it
// matches keys to struct fields case-insensitively, so "MAX_TOKENS" would set
// max_tokens, which OpenAI and Anthropic ignore as an unknown key.
func decodeBody(w http.ResponseWriter, body []byte, v any, fail errorWriter) bool {
	if err := unmarshalExact(body, reflect.ValueOf(v).Elem()); err != nil {
		fail(w, http.StatusBadRequest, "We could not parse the JSON body of your request: "+err.Error())
		return false
	}
	return true
}

// errNotObject is the error for a body or field that must be a JSON object.
var errNotObject = errors.New("expected a JSON object")

// unmarshalExact decodes the JSON object data into the struct dst field by
// field. A field is named by its json tag; an "alias" tag names a second
// spelling that counts when the first is absent (Gemini takes proto field
// names in camelCase and in snake_case). Struct-typed fields, and pointers to
// them, are decoded the same way; other fields by encoding/json. Keys no field
// names are ignored.
func unmarshalExact(data []byte, dst reflect.Value) error {
	// A map keeps exact keys, and assigning a duplicate key again keeps the
	// last value.
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field == "" {
			return errNotObject
		}
		return err
	}
	if fields == nil { // null
		return errNotObject
	}
	t := dst.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		raw, ok := fields[name]
		if !ok {
			if alias := f.Tag.Get("alias"); alias != "" {
				name = alias
				raw, ok = fields[alias]
			}
		}
		if !ok {
			continue
		}
		if err := unmarshalField(raw, dst.Field(i)); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// unmarshalField decodes one field's value into v.
func unmarshalField(raw json.RawMessage, v reflect.Value) error {
	switch {
	case v.Kind() == reflect.Struct:
		return unmarshalExact(raw, v)
	case v.Kind() == reflect.Pointer && v.Type().Elem().Kind() == reflect.Struct:
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			v.SetZero()
			return nil
		}
		p := reflect.New(v.Type().Elem())
		if err := unmarshalExact(raw, p.Elem()); err != nil {
			return err
		}
		v.Set(p)
		return nil
	default:
		return json.Unmarshal(raw, v.Addr().Interface())
	}
}
