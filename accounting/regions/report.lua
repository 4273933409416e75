
-- report: ARGV[7] is the region's use now, ARGV[8] what it has returned
-- (charged to itself so that it can no longer spend it). The lease is
-- renewed. Returns {g, x, held by all, reclaimed, written off}.
local now = now_us()
local st, held, reclaimed, written = load(now)
local s = mine(st)
held = held - holds(s)
s.u = tonumber(ARGV[7])
s.x = math.max(s.x, tonumber(ARGV[8]))
held = held + holds(s)
redis.call('HSET', KEYS[1], 'g:' .. me, str(s.g), 'x:' .. me, str(s.x),
  'u:' .. me, str(s.u), 't:' .. me, str(now), 'l:' .. me, ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return {s.g, s.x, held, reclaimed, written}
