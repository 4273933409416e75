-- counter.lua is the arithmetic of accounting/memstore/counter.go in Lua.
-- It is put in front of reserve.lua and settle.lua to make one script each,
-- so that both decide with the same code.
--
-- Redis runs Lua 5.1, where every number is a double. Times are µs since
-- the Unix epoch (about 2^51 today) and amounts are integers below 2^53
-- (the Go side checks), so every value here stays an exact integer except
-- a token bucket's tokens, which are floats as in memstore and are stored
-- with %.17g so that they read back bit for bit.
--
-- ARGV[1] is the clock: an offset (µs) added to TIME, always "0" in
-- production; or, in the package's tests only, "@" and a frozen time (µs).
-- ARGV[2] is accounting.SlidingSlots, ARGV[3] is accounting.SettledTTL (µs);
-- the items' own arguments follow.

local floor, ceil, min, max = math.floor, math.ceil, math.min, math.max

local SLOTS = tonumber(ARGV[2])
local RING = SLOTS + 1 -- memstore keeps SlidingSlots+1 slots in a ring
local HEAD = 3         -- ARGV entries before the items'

-- The store's clock: TIME, never the replica's. Redis >= 5 replicates a
-- script by its effects, so a script may read TIME and then write.
local now
-- pad lengthens key lifetimes under a frozen test clock, whose keys would
-- otherwise expire on Redis's running clock while the test's stands still.
local pad = 0
do
  local clock = ARGV[1]
  if string.byte(clock, 1) == 64 then -- "@": frozen, tests only
    now = tonumber(string.sub(clock, 2))
    pad = 3600000
  else
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2]) + tonumber(clock)
  end
end

-- idiv is floor(a / b) for integers, corrected for the rounding of the
-- float division so that it equals Go's a / b for a >= 0.
local function idiv(a, b)
  local q = floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

-- int formats an integral double without an exponent.
local function int(x) return string.format('%.0f', x) end

-- ms converts a lifetime in µs to PEXPIRE's milliseconds, rounding up so
-- that a key never disappears before its state stops mattering.
local function ms(us) return ceil(us / 1000) + pad end

-- Calendar months (UTC), with Howard Hinnant's days <-> civil algorithms.
local DAY = 86400000000

local function civil_from_days(z)
  z = z + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local y = yoe + era * 400
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local m
  if mp < 10 then m = mp + 3 else m = mp - 9 end
  if m <= 2 then y = y + 1 end
  return y, m
end

local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = floor(y / 400)
  local yoe = y - era * 400
  local mp
  if m > 2 then mp = m - 3 else mp = m + 9 end
  local doy = floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + floor(yoe / 4) - floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end

-- fixed_at is accounting.FixedWindowAt: the window holding now and its end.
local function fixed_at(c)
  if c.alg == 'm' then
    local y, m = civil_from_days(idiv(now, DAY))
    local ny, nm = y, m + 1
    if nm == 13 then ny, nm = y + 1, 1 end
    return y * 12 + m - 1, days_from_civil(ny, nm, 1) * DAY
  end
  local idx = idiv(now, c.period)
  return idx, (idx + 1) * c.period
end

-- A token bucket refills limit per window: rate is units per µs.
local function rate(c) return c.limit / c.period end

-- full_in is memstore's bucketFullIn: µs until the bucket is full.
local function full_in(c, tokens)
  local missing = c.cap - tokens
  if missing <= 0 then return 0 end
  return ceil(missing / rate(c))
end

-- states caches each key's state for the length of the script, so that
-- two items on one key see one counter, as in memstore.
local states = {}

-- load reads a counter. A state that has expired reads as a fresh one,
-- exactly where memstore replaces an expired counter: the key's PEXPIRE
-- runs on Redis's real clock and only reclaims memory.
local function load(c)
  local st = states[c.key]
  if st then return st end
  st = { c = c, dirty = false }
  if c.alg == 's' then
    -- slot index -> amount; only slots with an amount are stored.
    local flat = redis.call('HGETALL', c.key)
    local slots = {}
    for j = 1, #flat, 2 do
      slots[tonumber(flat[j])] = tonumber(flat[j + 1])
    end
    st.slots = slots
  elseif c.alg == 'b' then
    local v = redis.call('HMGET', c.key, 't', 'at')
    local tokens, at = tonumber(v[1]), tonumber(v[2])
    -- memstore's expiry is the last write's time plus full_in; "at" is
    -- that time, so the same expiry follows without storing it.
    if tokens == nil or at == nil or at + full_in(c, tokens) <= now then
      tokens, at = c.cap, now
    end
    st.tokens, st.at = tokens, at
  else
    local v = redis.call('HMGET', c.key, 'w', 'u')
    st.window, st.used = tonumber(v[1]), tonumber(v[2]) or 0
  end
  states[c.key] = st
  return st
end

-- roll moves a fixed window's state to the window holding now.
local function roll(c, st)
  local idx, e = fixed_at(c)
  if st.window ~= idx then
    st.window, st.used = idx, 0
  end
  st.ends = e
  return idx, e
end

local function refill(c, st)
  if now > st.at then
    st.tokens = min(c.cap, st.tokens + (now - st.at) * rate(c))
    st.at = now
  end
end

-- slot_put sets a sliding window's slot target to f(old amount), dropping
-- the slots that have left the window and any other slot sharing target's
-- ring position, as memstore's ring does.
local function slot_put(c, st, cur, target, amount)
  local oldest = cur - SLOTS
  local pos = target % RING
  for idx in pairs(st.slots) do
    if idx < oldest or (idx ~= target and idx % RING == pos) then
      st.slots[idx] = nil
    end
  end
  if amount > 0 then
    st.slots[target] = amount
  else
    st.slots[target] = nil
  end
  st.dirty = true
end

-- check is memstore's check: the item's state as flat integers
-- {remaining, reset µs, fits, retry µs, never fits, mark}.
local function check(c, st, amount)
  if c.alg == 'b' then
    refill(c, st)
    local r = { floor(st.tokens), full_in(c, st.tokens), 0, 0, 0, 0 }
    if amount > c.cap then
      r[5] = 1
    elseif amount <= st.tokens then
      r[3] = 1
    else
      r[4] = ceil((amount - st.tokens) / rate(c))
    end
    return r
  elseif c.alg == 's' then
    local slot = c.period
    local cur = idiv(now, slot)
    local oldest = cur - SLOTS
    local used, newest = 0, nil
    for idx, amt in pairs(st.slots) do
      if idx >= oldest and amt > 0 then
        used = used + amt
        if newest == nil or idx > newest then newest = idx end
      end
    end
    local r = { c.limit - used, 0, 0, 0, 0, cur }
    if newest ~= nil then r[2] = (newest + RING) * slot - now end
    if amount > c.limit then
      r[5] = 1
    elseif used + amount <= c.limit then
      r[3] = 1
    else
      -- Slot k leaves the count at (k+RING)*slot; free slots oldest
      -- first until the amount fits.
      local need = used + amount - c.limit
      for k = oldest, cur do
        local amt = st.slots[k]
        if amt ~= nil then
          need = need - amt
          if need <= 0 then
            r[4] = (k + RING) * slot - now
            break
          end
        end
      end
    end
    return r
  end
  local idx, e = roll(c, st)
  local r = { c.limit - st.used, e - now, 0, 0, 0, idx }
  if amount > c.limit then
    r[5] = 1
  elseif st.used + amount <= c.limit then
    r[3] = 1
  else
    r[4] = e - now
  end
  return r
end

-- commit is memstore's commit: charge amount (already checked) and update
-- the item's state r to describe the counter afterwards.
local function commit(c, st, amount, r)
  if c.alg == 'b' then
    st.tokens = st.tokens - amount
    r[1] = floor(st.tokens)
    r[2] = full_in(c, st.tokens)
    st.dirty = true
  elseif c.alg == 's' then
    local cur = r[6]
    slot_put(c, st, cur, cur, (st.slots[cur] or 0) + amount)
    r[1] = r[1] - amount
    r[2] = (cur + RING) * c.period - now
  else
    st.used = st.used + amount
    r[1] = r[1] - amount
    st.dirty = true
  end
end

-- settle is memstore's settle: replace reserved with actual on the window
-- or slot the charge was booked in (mark). When that window has passed,
-- an extra charge lands on the current one and a refund is dropped.
local function settle(c, st, reserved, actual, mark)
  local delta = actual - reserved
  if delta == 0 then return end
  if c.alg == 'b' then
    refill(c, st)
    st.tokens = min(c.cap, st.tokens - delta)
    st.dirty = true
  elseif c.alg == 's' then
    local cur = idiv(now, c.period)
    local target = mark
    if mark < cur - SLOTS then
      if delta < 0 then return end
      target = cur
    end
    slot_put(c, st, cur, target, max(0, (st.slots[target] or 0) + delta))
  else
    local idx = roll(c, st)
    if mark == idx then
      st.used = max(0, st.used + delta)
    elseif delta > 0 then
      st.used = st.used + delta
    else
      return
    end
    st.dirty = true
  end
end

-- save writes back every changed counter and sets its idle expiry to
-- memstore's "expires": a key lives exactly as long as its state matters.
local function save()
  for key, st in pairs(states) do
    if st.dirty then
      local c = st.c
      if c.alg == 'b' then
        local life = full_in(c, st.tokens)
        if life <= 0 then
          -- Full: the same as no key at all.
          redis.call('DEL', key)
        else
          redis.call('HSET', key, 't', string.format('%.17g', st.tokens), 'at', int(st.at))
          redis.call('PEXPIRE', key, ms(life))
        end
      elseif c.alg == 's' then
        -- Rewrite the whole hash: at most SLOTS+1 small fields, and it
        -- drops the stale ones in the same step.
        redis.call('DEL', key)
        local args, newest = { 'HSET', key }, nil
        for idx, amt in pairs(st.slots) do
          args[#args + 1] = int(idx)
          args[#args + 1] = int(amt)
          if newest == nil or idx > newest then newest = idx end
        end
        if newest ~= nil then
          redis.call(unpack(args))
          redis.call('PEXPIRE', key, ms((newest + RING) * c.period - now))
        end
      else
        redis.call('HSET', key, 'w', int(st.window), 'u', int(st.used))
        redis.call('PEXPIRE', key, ms(st.ends - now))
      end
    end
  end
end
