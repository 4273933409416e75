package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"help"}} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, nil, &out, &errOut); err != nil {
			t.Errorf("%v: got error %v, want none (help is not a failure)", args, err)
		}
		for _, want := range []string{"check-config", "estimate", "-version", "-config"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: help does not mention %s:\n%s", args, want, out.String())
			}
		}
	}
	for _, args := range [][]string{{"check-config", "-h"}, {"estimate", "-h"}, {"help", "check-config"}} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, nil, &out, &errOut); err != nil {
			t.Errorf("%v: got error %v, want none", args, err)
		}
		if !strings.Contains(out.String(), "usage: tokenwarden "+args[len(args)-1]) && !strings.Contains(out.String(), "usage: tokenwarden "+args[0]) {
			t.Errorf("%v: got %q, want the subcommand's usage on stdout", args, out.String())
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"-version"}, {"version"}} {
		var out bytes.Buffer
		if err := run(context.Background(), args, nil, &out, &out); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out.String(), "tokenwarden ") || !strings.Contains(out.String(), "go1") {
			t.Errorf("%v: got %q, want the version line", args, out.String())
		}
	}
}

func TestCheckConfigOnTheEmbeddedDefault(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"check-config"}, nil, &out, &errOut); err != nil {
		t.Fatalf("check-config without -config: %v (%s)", err, errOut.String())
	}
	for _, want := range []string{"embedded default", "config ok", "per minute", "when tier=free", "per day"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "map[") || strings.Contains(out.String(), "0m0s") {
		t.Errorf("output has Go's own renderings:\n%s", out.String())
	}
}

func TestHumanWindow(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{time.Second, "1 second"},
		{90 * time.Second, "90 seconds"},
		{time.Minute, "1 minute"},
		{time.Hour, "1 hour"},
		{24 * time.Hour, "1 day"},
		{7 * 24 * time.Hour, "7 days"},
		{36 * time.Hour, "36 hours"},
		{1500 * time.Millisecond, "1.5s"},
	}
	for _, tt := range tests {
		if got := humanWindow(tt.d); got != tt.want {
			t.Errorf("humanWindow(%v): got %q, want %q", tt.d, got, tt.want)
		}
	}
}
