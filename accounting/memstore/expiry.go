package memstore

import "github.com/tokenwarden/tokenwarden/accounting"

// Expiry. Every operation drops a few entries whose time has passed, so
// that memory tracks active callers and requests in flight, without
// iterating a Go map (starting an iteration costs more than the rest of
// a decision). Counters sit in a min-heap by deadline and records in a
// queue in the order they were written, so an operation that finds
// nothing due looks at one entry of each and stops.
//
// The bound on memory: the heap holds exactly one pointer per counter in
// the map; the queue holds at most 2×(records in the map)+queueSlack
// entries of 32 bytes (a settled record's entry is left behind, to be
// compacted away, rather than searched for).

// expireSteps is how many due entries of each kind an operation handles
// at most. More than one per operation makes expired entries go faster
// than new ones arrive, so the maps shrink back once callers go idle,
// and no single operation pays for a whole crowd expiring at once.
const expireSteps = 8

// queueSlack is how many settled records' entries the queue holds beyond
// twice the live records before it is compacted: compaction looks up
// every entry, so it runs at most once per queueSlack+live writes.
const queueSlack = 64

// record is what the store keeps for a reservation ID: its time (µs), or
// minus the time of the release that left a tombstone, and the sequence
// number of its entry in the queue.
type record struct {
	t   int64
	seq uint64
}

// queued is a record's entry in the expiry queue: when it stops counting,
// and which write of the ID it stands for. An entry whose record was
// deleted or written again since is stale.
type queued struct {
	id  string
	due int64
	seq uint64
}

// setRecordLocked writes id's record (t as records holds it) and queues
// its expiry.
func (s *Store) setRecordLocked(id string, t int64) {
	s.seq++
	s.records[id] = record{t: t, seq: s.seq}
	due := t
	if due < 0 {
		due = -due
	}
	s.queue = append(s.queue, queued{id: id, due: accounting.RecordExpiry(due), seq: s.seq})
	s.boundQueueLocked()
}

// deleteRecordLocked deletes id's record and what it remembers. Its entry
// in the queue is left behind, stale.
func (s *Store) deleteRecordLocked(id string) {
	delete(s.records, id)
	delete(s.skipped, id)
	s.boundQueueLocked()
}

// boundQueueLocked compacts the queue once it holds more than twice the
// records and queueSlack. Compaction leaves one entry per record; before
// it runs again, the records must have been written or deleted at least
// (records+queueSlack)/2 times, so its cost per write is a constant.
func (s *Store) boundQueueLocked() {
	if len(s.queue)-s.head <= 2*len(s.records)+queueSlack {
		return
	}
	n := 0
	for _, q := range s.queue[s.head:] {
		if r, ok := s.records[q.id]; ok && r.seq == q.seq {
			s.queue[n] = q
			n++
		}
	}
	clear(s.queue[n:])
	s.queue, s.head = s.queue[:n], 0
}

// scheduleCounterLocked puts a new counter in the heap, due now: the next
// operation files it under its real deadline, which the operation that
// created it is about to set.
func (s *Store) scheduleCounterLocked(ct *counter, now int64) {
	ct.due = now
	ct.idx = len(s.heap)
	s.heap = append(s.heap, ct)
	s.heapUp(ct.idx)
}

// dropCounterLocked deletes ct from the map and the heap.
func (s *Store) dropCounterLocked(ct *counter) {
	delete(s.counters, ct.key)
	last := len(s.heap) - 1
	i := ct.idx
	if i != last {
		s.heap[i] = s.heap[last]
		s.heap[i].idx = i
	}
	s.heap[last] = nil
	s.heap = s.heap[:last]
	if i != last {
		s.heapDown(i)
		s.heapUp(i)
	}
	ct.idx = -1
}

// expireLocked drops what has expired among the entries due by now.
func (s *Store) expireLocked(now int64) {
	for range expireSteps {
		if len(s.heap) == 0 || s.heap[0].due > now {
			break
		}
		ct := s.heap[0]
		if ct.until() <= now {
			s.dropCounterLocked(ct)
			continue
		}
		// Charged since it was filed: file it again under its deadline.
		ct.due = ct.until()
		s.heapDown(0)
	}
	for range expireSteps {
		if s.head == len(s.queue) || s.queue[s.head].due > now {
			break
		}
		q := s.queue[s.head]
		s.queue[s.head] = queued{}
		s.head++
		if r, ok := s.records[q.id]; ok && r.seq == q.seq {
			s.deleteRecordLocked(q.id)
		}
	}
	s.expireHoldsLocked(now)
	switch {
	case s.head == len(s.queue):
		s.queue, s.head = s.queue[:0], 0
	case s.head > 2*queueSlack && s.head >= len(s.queue)/2:
		// Most of the slice is behind the head: move the rest down so
		// that appending reuses it.
		n := copy(s.queue, s.queue[s.head:])
		clear(s.queue[n:])
		s.queue, s.head = s.queue[:n], 0
	}
}

func (s *Store) heapUp(i int) {
	h := s.heap
	for i > 0 {
		p := (i - 1) / 2
		if h[p].due <= h[i].due {
			break
		}
		h[p], h[i] = h[i], h[p]
		h[p].idx, h[i].idx = p, i
		i = p
	}
}

func (s *Store) heapDown(i int) {
	h := s.heap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].due < h[l].due {
			m = r
		}
		if h[i].due <= h[m].due {
			return
		}
		h[i], h[m] = h[m], h[i]
		h[i].idx, h[m].idx = i, m
		i = m
	}
}
