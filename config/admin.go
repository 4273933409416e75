package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// The bounds of the admin token: long enough that guessing it is out of
// the question, short enough to sit in a header, and of the characters a
// header carries unchanged.
const (
	MinAdminTokenBytes = 16
	MaxAdminTokenBytes = 4096
)

// adminToken reads the token that protects the admin listener's usage
// API from admin_token_file. It is read with the config (at start, at
// every reload), so that a file that is missing or unusable is a config
// error (the server does not start, a reload is refused, check-config
// says so) instead of leaving the API open or shut later. Errors never
// quote the file's content.
func (c *Config) adminToken(f *file, p *problems) {
	c.AdminTokenFile = f.AdminTokenFile
	if f.AdminTokenFile == "" {
		return
	}
	tok, err := readAdminToken(f.AdminTokenFile)
	if err != nil {
		p.add("admin_token_file", "%v", err)
		return
	}
	c.AdminToken = tok
}

func readAdminToken(path string) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, MaxAdminTokenBytes+64))
	if err != nil {
		return "", err
	}
	// A trailing newline (echo > file, a Secret written by hand) is not
	// part of the token.
	tok := strings.TrimSpace(string(b))
	switch {
	case len(tok) < MinAdminTokenBytes:
		return "", fmt.Errorf("%s: the token must be at least %d bytes", path, MinAdminTokenBytes)
	case len(tok) > MaxAdminTokenBytes:
		return "", fmt.Errorf("%s: the token must be at most %d bytes", path, MaxAdminTokenBytes)
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < 0x21 || tok[i] > 0x7e {
			return "", errors.New(path + ": the token must be printable ASCII without spaces (e.g. openssl rand -hex 32)")
		}
	}
	return tok, nil
}
