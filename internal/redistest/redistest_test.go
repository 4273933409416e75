package redistest

import "testing"

// TestDurable: a Durable server keeps a write across a crash (Kill) and
// a restart on the same port; a plain one forgets it.
func TestDurable(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
		kept bool
	}{
		{"durable", []Option{Durable()}, true},
		{"plain", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Start(t, tt.opts...)
			if reply, err := command(s.Addr(), "SET ledger 42"); err != nil || reply != "OK" {
				t.Fatalf("SET: got %q, %v", reply, err)
			}
			addr := s.Addr()
			s.Kill()
			s.Restart()
			if s.Addr() != addr {
				t.Fatalf("restarted on %s, want the same address %s", s.Addr(), addr)
			}
			got, err := command(s.Addr(), "GET ledger")
			if kept := err == nil && got == "42"; kept != tt.kept {
				t.Errorf("after a crash and restart: GET answered %q, %v; want the value kept: %v", got, err, tt.kept)
			}
		})
	}
}
