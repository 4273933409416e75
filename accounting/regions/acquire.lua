
-- acquire: ARGV[6] is how much the region wants. It is granted what is
-- free of the limit, up to that, and its lease is renewed.
-- Returns {granted now, g, x, reclaimed}.
local now = now_us()
local st, held, reclaimed = load(now)
local s = mine(st)
local want = tonumber(ARGV[6])
local free = tonumber(ARGV[2]) - held
local grant = math.max(0, math.min(want, free))
s.g = s.g + grant
redis.call('HSET', KEYS[1], 'g:' .. ARGV[1], str(s.g), 't:' .. ARGV[1], str(now), 'l:' .. ARGV[1], ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return {grant, s.g, s.x, reclaimed}
