package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
)

var _ accounting.Holder = (*Store)(nil)

// HoldKeyPrefix starts the key of a hold's data (see accounting.Holder),
// followed by the hold's ID. The hold's record is a reservation record
// (RecordKeyPrefix), written by tw_hold, so that tw_settle settles it
// as it settles any.
const HoldKeyPrefix = accounting.KeyPrefix + "h:"

// holdKey is the Redis key of hold id's data: one key, which any
// layout serves from its slot.
func (s *Store) holdKey(id string) string { return s.prefix + HoldKeyPrefix + id }

// Hold implements [accounting.Holder]: the data with SET NX (a live
// hold's answers ErrHeld), then the record with tw_hold, in every slot of
// req.Counters on the sharded layout, as Settle looks for them there. A
// failure after the data was written leaves a hold without a record:
// taking it finds data, and settling it finds no record, which keeps the
// charge (the safe direction).
func (s *Store) Hold(ctx context.Context, req accounting.HoldRequest) error {
	ttl := req.TTL.Microseconds()
	if ttl <= 0 {
		return errors.New("redisstore: a hold needs a positive TTL")
	}
	// The data's value starts with when the hold stops counting, on this
	// replica's idea of the store's clock, which TakeHold reads it by:
	// PX reclaims the key on Redis's own.
	value := binary.LittleEndian.AppendUint64(make([]byte, 0, 8+len(req.Data)), uint64(accounting.HoldExpiry(s.clockEstimate(), req.TTL)))
	value = append(value, req.Data...)
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	set, err := s.client.SetNX(cctx, s.holdKey(req.ID), value, req.TTL).Result()
	cancel()
	if err != nil {
		return unavailable(err)
	}
	if !set {
		return accounting.ErrHeld
	}
	var records []string
	if s.shardBy == "" {
		records = []string{s.recordKey(req.ID)}
	} else {
		keys := make([]string, len(req.Counters))
		for i := range req.Counters {
			keys[i] = req.Counters[i].Key
		}
		for _, g := range s.groups(keys) {
			records = append(records, groupRecordKey(g.slot, req.ID))
		}
	}
	arg := strconv.FormatInt(ttl, 10)
	for _, rec := range records {
		// One call per record: on a cluster, each is in a slot of its
		// own.
		cctx, cancel := context.WithTimeout(ctx, s.timeout)
		err := s.fcall(cctx, &lib.hold, []string{rec}, s.clock(), arg).Err()
		cancel()
		if err != nil {
			return unavailable(err)
		}
	}
	return nil
}

// TakeHold implements [accounting.Holder] with one GETDEL.
func (s *Store) TakeHold(ctx context.Context, id string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	value, err := s.client.GetDel(ctx, s.holdKey(id)).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, accounting.ErrNoReservation
	case err != nil:
		return nil, unavailable(err)
	case len(value) < 8 || int64(binary.LittleEndian.Uint64(value)) <= s.clockEstimate():
		return nil, accounting.ErrNoReservation
	}
	return value[8:], nil
}
