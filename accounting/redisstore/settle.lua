-- settle.lua follows counter.lua: one settlement, applied at most once.
--
-- KEYS[1] is the reservation's settled marker, KEYS[1+i] item i's counter
-- key; ARGV after the head holds seven values per item: algorithm, limit,
-- capacity, period (as in reserve.lua), reserved, actual and mark.
--
-- Returns 1 when this call settled, 0 when the reservation had been
-- settled already.

-- The marker holds the time (µs, store clock) until which the ID is
-- remembered, as memstore's settled map does; PX reclaims it on Redis's
-- own clock.
local until_ = tonumber(redis.call('GET', KEYS[1]))
if until_ ~= nil and until_ > now then
  return 0
end
local ttl = tonumber(ARGV[3])
redis.call('SET', KEYS[1], int(now + ttl), 'PX', ms(ttl))

for i = 2, #KEYS do
  local b = HEAD + (i - 2) * 7
  local c = {
    key = KEYS[i],
    alg = ARGV[b + 1],
    limit = tonumber(ARGV[b + 2]),
    cap = tonumber(ARGV[b + 3]),
    period = tonumber(ARGV[b + 4]),
  }
  local reserved, actual = tonumber(ARGV[b + 5]), tonumber(ARGV[b + 6])
  -- An exact estimate changes nothing: skip the read.
  if actual ~= reserved then
    settle(c, load(c), reserved, actual, tonumber(ARGV[b + 7]))
  end
end
save()
return 1
