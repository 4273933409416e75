package memstore

import (
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting/storetest"
)

func TestInspectContract(t *testing.T) {
	storetest.RunInspect(t, func(t *testing.T) storetest.Harness {
		h, _, _ := newHarness(t)
		return h
	})
}
