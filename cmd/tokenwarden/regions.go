package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/redisstore"
	"github.com/tokenwarden/tokenwarden/accounting/regions"
	"github.com/tokenwarden/tokenwarden/config"
)

// newRegion builds the region the regions section describes, on the
// server's store and a client of the ledger's Redis, and keeps its
// leases until the returned func is called, at the very end of serve
// (when the streams cut at shutdown have settled): that gives back what
// the region holds unused and closes the ledger's client.
func newRegion(cfg *config.Regions, store accounting.Store, log *slog.Logger, reg prometheus.Registerer) (*regions.Region, func(), error) {
	// A redisstore on the ledger's Redis is only the way to its
	// client, configured as store.redis is (timeouts, no retries).
	ls, err := redisstore.New(cfg.Ledger)
	if err != nil {
		return nil, nil, fmt.Errorf("regions.ledger: %w", err)
	}
	ro := cfg.Region
	ro.Store, ro.Logger, ro.Metrics = store, log, regions.NewMetrics(reg)
	ro.Ledger = regions.NewLedger(ls.Client(), regions.LedgerOptions{Timeout: cfg.Ledger.Timeout})
	region, err := regions.New(ro)
	if err != nil {
		_ = ls.Close()
		return nil, nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		region.Run(ctx)
		// Shutting down: what this replica holds unused goes back to
		// the ledger now rather than after its lease lapses.
		cctx, cancel := context.WithTimeout(context.Background(), cfg.Ledger.Timeout+time.Second)
		defer cancel()
		if err := region.Close(cctx); err != nil {
			log.Warn("giving back the region's unused leases failed; they return when they lapse", "region", region.Name(), "err", err)
		}
	}()
	log.Info("leasing limits across regions", "region", region.Name())
	return region, func() {
		stop()
		<-done
		_ = ls.Close()
	}, nil
}
