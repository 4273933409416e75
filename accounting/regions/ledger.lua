-- The ledger of one global counter in one window: a hash whose fields
-- are, per incarnation M = R#I of a region R (I: the id the region's store
-- holds for the window, see the package doc), g:M (granted, ever, in the
-- window), x:M (released: returned by M or reclaimed from it), u:M (M's use
-- at its last report), t:M (when M last reached the ledger, µs on the
-- clock below) and l:M (how long, µs, after t:M M's lease lapses: R's own
-- lease TTL plus the grace, so that regions configured differently never
-- cut each other's leases short); and per region, i:R (the incarnation
-- that called last: R's current one).
--
-- What M holds against the limit is max(g - x, u): its lease, or what it
-- reported having spent if that is more (a settlement above the estimate,
-- or spending after its lease was reclaimed). Every incarnation's holding
-- counts, the superseded ones' for good: a region whose store forgot its
-- counters (a new incarnation) may have spent all its last incarnation
-- held, so that is written off, never granted again in the window; and
-- two regions sharing a name are each capped by their own grants.
--
-- ARGV[1] is the region, ARGV[2] the limit, ARGV[3] the caller's l:R,
-- ARGV[4] the key's expiry (s), ARGV[5] the time (µs), or "" for the
-- ledger's own (TIME), ARGV[6] the caller's incarnation; the rest are
-- the call's.

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

local me = ARGV[1] .. '#' .. ARGV[6]

local function holds(s)
  return math.max(s.g - s.x, s.u)
end

-- load reads every incarnation's state, makes the caller's incarnation
-- its region's current one, reclaims the unreported part of each lapsed
-- lease of a current incarnation (setting x so that g - x = u), and
-- returns the states, the sum of what all incarnations hold, what it
-- reclaimed, and what it wrote off: what the incarnation the caller's
-- supersedes held, or -1 if it supersedes none (it was current already,
-- or is the region's first).
local function load(now)
  local h = redis.call('HGETALL', KEYS[1])
  local st, cur = {}, {}
  for i = 1, #h, 2 do
    local f = h[i]
    local kind, m = string.sub(f, 1, 1), string.sub(f, 3)
    if kind == 'i' then
      cur[m] = h[i + 1]
    else
      local s = st[m]
      if not s then
        s = {g = 0, x = 0, u = 0, t = 0, l = 0}
        st[m] = s
      end
      s[kind] = tonumber(h[i + 1])
    end
  end
  local written = -1
  local old = cur[ARGV[1]]
  if old ~= ARGV[6] then
    if old then
      written = 0
      if st[ARGV[1] .. '#' .. old] then
        written = holds(st[ARGV[1] .. '#' .. old])
      end
    end
    cur[ARGV[1]] = ARGV[6]
    redis.call('HSET', KEYS[1], 'i:' .. ARGV[1], ARGV[6])
  end
  local held, reclaimed = 0, 0
  for m, s in pairs(st) do
    local r, id = string.match(m, '^(.*)#(.*)$')
    local u = math.max(s.u, 0)
    if r and cur[r] == id and s.t + s.l < now and s.g - s.x > u then
      reclaimed = reclaimed + (s.g - s.x - u)
      s.x = s.g - u
      redis.call('HSET', KEYS[1], 'x:' .. m, str(s.x))
    end
    held = held + holds(s)
  end
  return st, held, reclaimed, written
end

local function mine(st)
  local s = st[me]
  if not s then
    s = {g = 0, x = 0, u = 0, t = 0, l = 0}
    st[me] = s
  end
  return s
end
