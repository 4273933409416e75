package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// peekPipeline is how many calls of tw_peek peekSharded sends in one
// pipeline: the cluster client splits it by master and sends each part
// in one round trip, all masters at once.
const peekPipeline = 64

// peekSharded is Peek on the sharded layout, where one call of tw_peek
// may only read the keys of one slot, and Top's keys spread over every
// slot: one call per slot (of at most peekBatch counters), pipelined, so
// that reading 10,000 counters costs about 160 round trips per master
// rather than 10,000. tw_peek writes nothing, so a pipeline that fails is
// simply a failed read.
func (s *Store) peekSharded(ctx context.Context, counters []accounting.Counter) ([]accounting.CounterUsage, error) {
	keys := make([]string, len(counters))
	for i := range counters {
		keys[i] = counters[i].Key
	}
	type call struct {
		idx []int
		cs  []accounting.Counter
	}
	var calls []call
	for _, g := range s.groups(keys) {
		for idx := g.idx; len(idx) > 0; {
			n := min(len(idx), peekBatch)
			c := call{idx: idx[:n], cs: make([]accounting.Counter, n)}
			for j, i := range c.idx {
				c.cs[j] = counters[i]
			}
			calls = append(calls, c)
			idx = idx[n:]
		}
	}
	out := make([]accounting.CounterUsage, len(counters))
	for len(calls) > 0 {
		chunk := calls[:min(len(calls), peekPipeline)]
		calls = calls[len(chunk):]
		replies := make([]*redis.Cmd, len(chunk))
		run := func() error {
			pctx, cancel := context.WithTimeout(ctx, s.timeout)
			defer cancel()
			pipe := s.client.Pipeline()
			for j, c := range chunk {
				keys, args, err := s.peekArgs(c.cs)
				if err != nil {
					return err
				}
				replies[j] = pipe.FCall(pctx, lib.peek, keys, args...)
			}
			_, err := pipe.Exec(pctx)
			return err
		}
		err := run()
		if err != nil && redis.HasErrorPrefix(err, "Function not found") {
			lctx, cancel := context.WithTimeout(ctx, s.timeout)
			err = s.loadLibrary(lctx)
			cancel()
			if err == nil {
				err = run()
			}
		}
		if err != nil {
			return nil, unavailable(err)
		}
		for j, c := range chunk {
			reply, err := replies[j].Text()
			if err != nil {
				return nil, unavailable(err)
			}
			got, err := peekUsage(c.cs, reply)
			if err != nil {
				return nil, err
			}
			for k, i := range c.idx {
				out[i] = got[k]
			}
		}
	}
	return out, nil
}
