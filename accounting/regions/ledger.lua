-- The ledger of one global counter in one window: a hash whose fields
-- are, per region R, g:R (granted, ever, in the window), x:R (released:
-- returned by R or reclaimed from it), u:R (R's use at its last report),
-- t:R (when R last reached the ledger, µs on the clock below) and l:R
-- (how long, µs, after t:R R's lease lapses: R's own lease TTL plus the
-- grace, so that regions configured differently never cut each other's
-- leases short).
--
-- What R holds against the limit is max(g - x, u): its lease, or what it
-- reported having spent if that is more (a settlement above the estimate,
-- or spending after its lease was reclaimed).
--
-- ARGV[1] is the region, ARGV[2] the limit, ARGV[3] the caller's l:R,
-- ARGV[4] the key's expiry (s), ARGV[5] the time (µs), or "" for the
-- ledger's own (TIME); the rest are the call's.

-- str spells a number for HSET as an integer, whatever number format the
-- Lua that Redis embeds was built with (%.14g would round a time in µs).
local function str(n)
  return string.format('%.0f', n)
end

local function now_us()
  local t = tonumber(ARGV[5])
  if t then return t end
  local tm = redis.call('TIME')
  return tonumber(tm[1]) * 1000000 + tonumber(tm[2])
end

-- load reads every region's state, reclaims the unreported part of each
-- lapsed lease (setting x so that g - x = u), and returns the states, the
-- sum of what all regions hold, and what it reclaimed.
local function load(now)
  local h = redis.call('HGETALL', KEYS[1])
  local st = {}
  for i = 1, #h, 2 do
    local f = h[i]
    local r = string.sub(f, 3)
    local s = st[r]
    if not s then
      s = {g = 0, x = 0, u = 0, t = 0, l = 0}
      st[r] = s
    end
    s[string.sub(f, 1, 1)] = tonumber(h[i + 1])
  end
  local held, reclaimed = 0, 0
  for r, s in pairs(st) do
    local u = math.max(s.u, 0)
    if s.t + s.l < now and s.g - s.x > u then
      reclaimed = reclaimed + (s.g - s.x - u)
      s.x = s.g - u
      redis.call('HSET', KEYS[1], 'x:' .. r, str(s.x))
    end
    held = held + math.max(s.g - s.x, s.u)
  end
  return st, held, reclaimed
end

local function mine(st)
  local s = st[ARGV[1]]
  if not s then
    s = {g = 0, x = 0, u = 0, t = 0, l = 0}
    st[ARGV[1]] = s
  end
  return s
end
