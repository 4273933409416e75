
-- acquire: ARGV[7] is how much the region wants. It is granted what is
-- free of the limit, up to that, and its lease is renewed.
-- Returns {granted now, g, x, reclaimed, written off}.
local now = now_us()
local st, held, reclaimed, written = load(now)
local s = mine(st)
local want = tonumber(ARGV[7])
local free = tonumber(ARGV[2]) - held
local grant = math.max(0, math.min(want, free))
s.g = s.g + grant
redis.call('HSET', KEYS[1], 'g:' .. me, str(s.g), 't:' .. me, str(now), 'l:' .. me, ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return {grant, s.g, s.x, reclaimed, written}
