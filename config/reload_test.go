package config_test

import (
	"testing"
	"time"

	"github.com/tokenwarden/tokenwarden/config"
)

func TestParseReload(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		want    time.Duration
		wantErr string // the whole error; "" for none
	}{
		{name: "absent", yaml: "listen: 127.0.0.1:1\n", want: config.DefaultWatchInterval},
		{name: "empty section", yaml: "reload: {}\n", want: config.DefaultWatchInterval},
		{name: "set", yaml: "reload: {watch_interval: 30s}\n", want: 30 * time.Second},
		{name: "zero is off", yaml: "reload: {watch_interval: 0}\n", want: 0},
		{name: "zero duration is off", yaml: "reload: {watch_interval: 0s}\n", want: 0},
		{name: "off", yaml: "reload: {watch_interval: off}\n", want: 0},
		{name: "too short", yaml: "reload: {watch_interval: 500ms}\n",
			wantErr: `config: reload.watch_interval: "500ms" is not a duration of at least 1s (or 0 or off)`},
		{name: "negative", yaml: "reload: {watch_interval: -1s}\n",
			wantErr: `config: reload.watch_interval: "-1s" is not a duration of at least 1s (or 0 or off)`},
		{name: "not a duration", yaml: "reload: {watch_interval: often}\n",
			wantErr: `config: reload.watch_interval: "often" is not a duration of at least 1s (or 0 or off)`},
		{name: "unknown key", yaml: "reload: {interval: 1s}\n", wantErr: "config: reload.interval: unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Parse([]byte(tt.yaml))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Reload.WatchInterval != tt.want {
				t.Errorf("watch interval: got %v, want %v", c.Reload.WatchInterval, tt.want)
			}
		})
	}
}
