
-- report: ARGV[6] is the region's use now, ARGV[7] what it has returned
-- (charged to itself so that it can no longer spend it). The lease is
-- renewed. Returns {g, x, held by all, reclaimed}.
local now = now_us()
local st, held, reclaimed = load(now)
local s = mine(st)
held = held - math.max(s.g - s.x, s.u)
s.u = tonumber(ARGV[6])
s.x = math.max(s.x, tonumber(ARGV[7]))
held = held + math.max(s.g - s.x, s.u)
redis.call('HSET', KEYS[1], 'g:' .. ARGV[1], str(s.g), 'x:' .. ARGV[1], str(s.x),
  'u:' .. ARGV[1], str(s.u), 't:' .. ARGV[1], str(now), 'l:' .. ARGV[1], ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return {s.g, s.x, held, reclaimed}
