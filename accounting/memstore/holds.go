package memstore

import (
	"context"
	"strings"

	"github.com/tokenwarden/tokenwarden/accounting"
)

var _ accounting.Holder = (*Store)(nil)

// Holds (see accounting.Holder). A hold's record is a reservation record
// in records, so that Settle finds it as it finds any: its time is set
// ahead (accounting.RecordDated), which keeps it counting until the TTL
// has passed (accounting.HoldExpiry). Its expiry is queued apart from the reservations' (holdQueue):
// holds outlive the records written after them, and the records' queue
// relies on its entries falling due in the order they were written.
// Holds fall due in write order too as long as they share a TTL, as the
// Limiter's do; one with a shorter TTL behind a longer one stops counting
// on time all the same, and is only dropped from memory late.

// hold is a hold's data and when it stops counting (µs).
type hold struct {
	data  []byte
	until int64
}

// Hold implements accounting.Holder.
func (s *Store) Hold(ctx context.Context, req accounting.HoldRequest) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := s.now().UnixMicro()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(now)
	if h, ok := s.holds[req.ID]; ok && h.until > now {
		return accounting.ErrHeld
	}
	// A copy: the ID and data are the caller's, and outlive the call.
	id := strings.Clone(req.ID)
	until := accounting.HoldExpiry(now, req.TTL)
	if s.holds == nil {
		s.holds = make(map[string]hold)
	}
	s.holds[id] = hold{data: append([]byte(nil), req.Data...), until: until}
	s.seq++
	s.records[id] = record{t: accounting.RecordDated(until), seq: s.seq}
	delete(s.skipped, id)
	s.holdQueue = append(s.holdQueue, queued{id: id, due: until, seq: s.seq})
	return nil
}

// TakeHold implements accounting.Holder.
func (s *Store) TakeHold(ctx context.Context, id string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := s.now().UnixMicro()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(now)
	h, ok := s.holds[id]
	if !ok || h.until <= now {
		return nil, accounting.ErrNoReservation
	}
	delete(s.holds, id)
	return h.data, nil
}

// expireHoldsLocked drops the holds due by now, data and record (unless
// the record was written again since), a few at a time.
func (s *Store) expireHoldsLocked(now int64) {
	for range expireSteps {
		if len(s.holdQueue) == 0 || s.holdQueue[0].due > now {
			break
		}
		q := s.holdQueue[0]
		s.holdQueue[0] = queued{}
		s.holdQueue = s.holdQueue[1:]
		if h, ok := s.holds[q.id]; ok && h.until <= now {
			delete(s.holds, q.id)
		}
		if r, ok := s.records[q.id]; ok && r.seq == q.seq {
			s.deleteRecordLocked(q.id)
		}
	}
}
