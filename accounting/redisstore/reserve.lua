-- reserve.lua follows counter.lua: one atomic, all-or-nothing reservation.
--
-- KEYS[i] is item i's counter key; ARGV after the head holds five values
-- per item: algorithm ("f" fixed, "m" calendar month, "s" sliding, "b"
-- bucket), limit, capacity, period (µs: the window, or a sliding window's
-- slot) and amount.
--
-- Returns {admitted, then per item: remaining, reset µs, fits, retry µs,
-- never fits, mark}.

local n = #KEYS
local items = {}
local admitted = 1
for i = 1, n do
  local b = HEAD + (i - 1) * 5
  local c = {
    key = KEYS[i],
    alg = ARGV[b + 1],
    limit = tonumber(ARGV[b + 2]),
    cap = tonumber(ARGV[b + 3]),
    period = tonumber(ARGV[b + 4]),
  }
  local amount = tonumber(ARGV[b + 5])
  local st = load(c)
  -- Every item is checked before any is charged, so a request that does
  -- not fit charges nothing.
  local r = check(c, st, amount)
  if r[3] == 0 then admitted = 0 end
  items[i] = { c, st, amount, r }
end

if admitted == 1 then
  for i = 1, n do
    local it = items[i]
    commit(it[1], it[2], it[3], it[4])
  end
  save()
end

local out = { admitted }
for i = 1, n do
  local r = items[i][4]
  for j = 1, 6 do out[#out + 1] = r[j] end
end
return out
