// The Lua script that decides checks' limits inside Redis, atomically: the same definitions as
// algorithm.cc (same integer arithmetic, exact in Lua's doubles below 2^53), dry-running every
// limit of a check and committing only if every enforced one admits. One call decides several
// checks (a pipelined batch of them) one after the other, as separate calls would: Redis pays
// a script call once for the batch.
//
// KEYS: the state keys of every check's limits, check after check. ARGV[1]: the deadline in
// Redis's own clock (Unix µs; 0: none); ARGV[2]: the number of checks; then per check: now
// (Unix ms), its number of limits, and seven per limit: algorithm (the Algorithm enum's
// number), limit, window_ms, max_wait_ms, cost, shadow (0/1), debt (units the front door
// admitted on its own while Redis was unreachable, charged first as algorithm.h's Charge
// does). A cost of 0 decides nothing (allowed, all else 0): the check only charges.
// Returns five integers per limit, check after check: allowed (0/1), remaining,
// retry_after_ms, reset_ms, delay_ms; or the single integer -1, having changed nothing, when
// it runs after the deadline (the callers have stopped waiting and decided without Redis:
// counting the checks here too would count them twice).
//
// Numbers go to Redis as Lua numbers: Redis 7 writes them with 17 significant digits, exact
// for these integers; `num` formats the ones joined into text (Lua's own conversion keeps 14).
#ifndef TWEETSEARCH_LIMITER_REDIS_SCRIPT_H_
#define TWEETSEARCH_LIMITER_REDIS_SCRIPT_H_

namespace tweetsearch::limiter {

inline constexpr char kDecideScript[] = R"lua(
local deadline = tonumber(ARGV[1])
if deadline > 0 then
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000000 + tonumber(t[2]) > deadline then return {-1} end
end
local call, floor, min, max, tonumber = redis.call, math.floor, math.min, math.max, tonumber
local now = 0  -- the current check's
local function num(x) return string.format('%.0f', x) end
local function ceil_div(a, b) if a <= 0 then return 0 end return floor((a + b - 1) / b) end

-- Every decider answers allowed (0/1), remaining, retry_after_ms, reset_ms, delay_ms, then
-- what committing the admission writes: a kind (commit's) and up to five values.
local function bucket(key, L, W, cost, meter)
  local cap, need = L * W, cost * W
  local st = call('HMGET', key, 'a', 'u')
  local tokens, updated, started = cap, now, st[1] ~= false
  if started then
    local a = tonumber(st[1])
    updated = tonumber(st[2])
    if meter then tokens = cap - a else tokens = a end
    tokens = min(cap, tokens + min(max(now - updated, 0), W) * L)
  end
  local reset = ceil_div(cap - tokens, L)
  if cost > L then return 0, floor(tokens / W), W, reset, 0 end
  if tokens < need then return 0, floor(tokens / W), ceil_div(need - tokens, L), reset, 0 end
  tokens = tokens - need
  local u = now
  if started then u = max(now, updated) end
  local stored = tokens
  if meter then stored = cap - tokens end
  return 1, floor(tokens / W), 0, ceil_div(cap - tokens, L), 0, 1, stored, u, 2 * W
end

local function fixed(key, L, W, cost)
  local start = now - (now % W)
  local st = call('HMGET', key, 's', 'c')
  local reset = start + W - now
  local c, ttl = 0, reset + 1000  -- expires with its window (and a second), set once
  if st[1] ~= false and tonumber(st[1]) == start then c, ttl = tonumber(st[2]), 0 end
  if cost > L then return 0, L - min(c, L), W, reset, 0 end
  if c + cost > L then return 0, L - min(c, L), reset, reset, 0 end
  c = c + cost
  return 1, L - min(c, L), 0, reset, 0, 2, start, c, ttl
end

local function counter(key, L, W, cost)
  local start = now - (now % W)
  local st = call('HMGET', key, 's', 'c', 'p')
  -- A state counts until both its windows have slid out: its expiry is set once per window.
  local cur, prev, ttl = 0, 0, start + 2 * W - now + 1000
  if st[1] ~= false then
    local s = tonumber(st[1])
    if s == start then cur = tonumber(st[2]); prev = tonumber(st[3]); ttl = 0
    elseif s + W == start then prev = tonumber(st[2]) end
  end
  local elapsed = now - start
  local estimate = prev * (W - elapsed) + cur * W
  local cap, need = L * W, cost * W
  local allowed, retry, used = 0, 0, estimate
  if cost <= L and estimate + need <= cap then
    allowed = 1
    cur = cur + cost
    used = used + need
  elseif cost > L then retry = W
  elseif cur + cost <= L and prev > 0 then
    retry = max(1, W - floor((cap - (cur + cost) * W) / prev) - elapsed)
  else
    local e = 0
    if cur > 0 then e = W - floor((cap - need) / cur) end
    retry = W - elapsed + max(0, e)
  end
  local remaining, reset = 0, 0
  if used < cap then remaining = floor((cap - used) / W) end
  if cur > 0 then reset = 2 * W - elapsed elseif prev > 0 then reset = W - elapsed end
  return allowed, remaining, retry, reset, 0, 3, start, cur, ttl, prev
end

-- The log is a sorted set of "seq:cost" members scored by time, beside a hash holding the
-- running total of their costs ('t'), the sequence ('n') and the newest entry's time ('l').
-- Every call is O(log n) plus the entries it expires: it reads the total, not the set, and a
-- refusal reads only the oldest entries that must expire for the request to fit (each costs
-- at least 1).
local function cost_of(member) return tonumber(string.match(member, ':(%d+)$')) end

-- What a log holds: its total, sequence and newest entry's time (false: none), once the
-- entries at or before now - W have gone.
local function read_log(key, hkey, W)
  local h = call('HMGET', hkey, 't', 'n', 'l')
  local edge = now - W
  if h[1] then
    local total, seq, newest = tonumber(h[1]), tonumber(h[2] or '0'), false
    if h[3] then newest = tonumber(h[3]) end
    local expired = call('ZRANGEBYSCORE', key, '-inf', edge)
    if #expired > 0 then
      for i = 1, #expired do total = total - cost_of(expired[i]) end
      call('ZREMRANGEBYSCORE', key, '-inf', edge)
      call('HSET', hkey, 't', total)
    end
    if not h[3] and total > 0 then  -- kept by an older script
      local last = call('ZRANGE', key, -1, -1, 'WITHSCORES')
      if #last > 0 then newest = tonumber(last[2]) end
    end
    if newest and newest <= edge then newest = false end
    return total, seq, newest
  end
  if call('ZCARD', key) == 0 then return 0, 0, false end
  -- A log an older script kept without a total: count the set once.
  call('ZREMRANGEBYSCORE', key, '-inf', edge)
  local members = call('ZRANGE', key, 0, -1, 'WITHSCORES')
  local total, newest = 0, false
  for i = 1, #members, 2 do total = total + cost_of(members[i]) end
  if #members > 0 then newest = tonumber(members[#members]) end
  return total, tonumber(call('GET', key .. ':n') or '0'), newest
end

-- Appends an entry of `cost` at now to a log of `total`, sequence `seq` and newest entry's
-- time `newest` (false: none).
local function append_log(key, hkey, W, cost, total, seq, newest)
  call('HSET', hkey, 't', total + cost, 'n', seq + 1, 'l', max(now, newest or now))
  call('ZADD', key, now, num(seq + 1) .. ':' .. num(cost))
  call('PEXPIRE', key, W)
  call('PEXPIRE', hkey, W)
end

local function log(key, L, W, cost)
  local total, seq, newest = read_log(key, key .. ':h', W)
  if cost <= L and total + cost <= L then  -- full again once its newest entry, this one, leaves
    return 1, L - min(total + cost, L), 0, max(newest or now, now) + W - now, 0, 4, W, cost,
           total, seq, newest
  end
  local reset = 0
  if newest then reset = newest + W - now end
  local retry = W
  if cost <= L then
    local oldest = call('ZRANGE', key, 0, total + cost - L - 1, 'WITHSCORES')
    local left = total
    for i = 1, #oldest, 2 do
      left = left - cost_of(oldest[i])
      if left + cost <= L then retry = max(1, tonumber(oldest[i + 1]) + W - now); break end
    end
  end
  return 0, L - min(total, L), retry, reset, 0
end

local function gcra(key, L, W, cost)
  local nowus, win = now * 1000, W * 1000
  local T = max(1, floor(win / L))
  local tat = max(tonumber(call('GET', key) or '0'), nowus)
  local new_tat = tat + cost * T
  if cost <= L and new_tat - nowus <= win then
    return 1, min(L, max(0, floor((nowus + win - new_tat) / T))), 0,
           ceil_div(new_tat - nowus, 1000), 0, 5, new_tat, floor((new_tat - nowus) / 1000) + 1000
  end
  local retry = W
  if cost <= L then retry = ceil_div(new_tat - nowus - win, 1000) end
  return 0, min(L, max(0, floor((nowus + win - tat) / T))), retry, ceil_div(tat - nowus, 1000), 0
end

local function queue(key, L, W, max_wait, cost)
  local nowus, wait = now * 1000, max_wait * 1000
  local T = max(1, floor(W * 1000 / L))
  local slot = max(tonumber(call('GET', key) or '0'), nowus)
  local allowed, retry, delay, nxt = 0, 0, 0, slot
  if cost <= L and slot - nowus <= wait then
    allowed, delay, nxt = 1, ceil_div(slot - nowus, 1000), slot + cost * T
  elseif cost > L then retry = W
  else retry = ceil_div(slot - nowus - wait, 1000) end
  local room, remaining = nowus + wait - nxt, 0
  if room >= 0 then remaining = min(L, floor(room / T) + 1) end
  return allowed, remaining, retry, ceil_div(nxt - nowus, 1000), delay,
         5, nxt, floor((nxt - nowus) / 1000) + 1000
end

-- Writes what an admission decided (the kinds the deciders answer).
local function commit(key, kind, x, y, z, w, v)
  if kind == 1 then
    call('HSET', key, 'a', x, 'u', y)
    call('PEXPIRE', key, z)
  elseif kind == 2 then
    call('HSET', key, 's', x, 'c', y)
    if z > 0 then call('PEXPIRE', key, z) end
  elseif kind == 3 then
    call('HSET', key, 's', x, 'c', y, 'p', w)
    if z > 0 then call('PEXPIRE', key, z) end
  elseif kind == 4 then
    append_log(key, key .. ':h', x, y, z, w, v)
  else
    call('SET', key, x, 'PX', y)
  end
end

-- Charges (algorithm.cc's Charge): units admitted elsewhere, counted as if admitted now,
-- never beyond the fullest state the algorithm reaches by itself.
local function charge_bucket(key, L, W, units, meter)
  local cap = L * W
  local st = redis.call('HMGET', key, 'a', 'u')
  local tokens, u = cap, now
  if st[1] ~= false then
    local a = tonumber(st[1])
    u = math.max(now, tonumber(st[2]))
    if meter then tokens = cap - a else tokens = a end
    tokens = math.min(cap, tokens + math.min(math.max(now - tonumber(st[2]), 0), W) * L)
  end
  tokens = math.max(0, tokens - math.min(units, math.floor(tokens / W) + 1) * W)
  local stored = tokens
  if meter then stored = cap - tokens end
  redis.call('HSET', key, 'a', num(stored), 'u', num(u))
  redis.call('PEXPIRE', key, 2 * W)
end

local function charge_window(key, L, W, units, ttl)
  local start = now - (now % W)
  local st = redis.call('HMGET', key, 's', 'c', 'p')
  local cur, prev = 0, 0
  if st[1] ~= false then
    local s = tonumber(st[1])
    if s == start then cur = tonumber(st[2]); prev = tonumber(st[3] or '0')
    elseif s + W == start then prev = tonumber(st[2]) end
  end
  cur = math.min(L, cur + units)
  redis.call('HSET', key, 's', num(start), 'c', num(cur), 'p', num(prev))
  redis.call('PEXPIRE', key, ttl)
end

local function charge_log(key, L, W, units)
  local hkey = key .. ':h'
  local total, seq, newest = read_log(key, hkey, W)  -- expires what no longer counts
  -- every unit, even beyond the limit
  append_log(key, hkey, W, min(units, 1073741824), total, seq, newest)
end

local function charge_tat(key, L, W, units, ahead)
  local nowus = now * 1000
  local T = math.max(1, math.floor(W * 1000 / L))
  local tat = math.max(tonumber(redis.call('GET', key) or '0'), nowus)
  local t = math.max(tat, math.min(nowus + ahead * 1000, tat + math.min(units, L) * T))
  redis.call('SET', key, num(t), 'PX', math.floor((t - nowus) / 1000) + 1000)
end

local function charge(key, algo, L, W, max_wait, units)
  if algo == 0 or algo == 1 then charge_bucket(key, L, W, units, algo == 1)
  elseif algo == 2 then charge_tat(key, L, W, units, W + max_wait)
  elseif algo == 3 then charge_window(key, L, W, units, now - (now % W) + W - now + 1000)
  elseif algo == 4 then charge_log(key, L, W, units)
  elseif algo == 5 then charge_window(key, L, W, units, 2 * W)
  else charge_tat(key, L, W, units, W) end
end

-- Decides one check: its limits are KEYS[k0 + i] and ARGV[a + 7 (i - 1) + 1 ..+ 7] (i = 1..n).
-- Its five answers per limit go to `out` from `o`; admissions are written once every enforced
-- limit admits (shadow limits never refuse). Answers how many answers `out` holds after it.
local pending = {}  -- the admissions to write, seven entries each (commit's arguments)
local function decide(k0, a, n, out, o)
  for i = 1, n do
    local b = a + (i - 1) * 7
    local debt = tonumber(ARGV[b + 7])
    if debt > 0 then
      charge(KEYS[k0 + i], tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]),
             tonumber(ARGV[b + 4]), debt)
    end
  end
  local all, p = true, 0
  for i = 1, n do
    local b = a + (i - 1) * 7
    local algo, L, W, cost = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]),
                             tonumber(ARGV[b + 5])
    local key = KEYS[k0 + i]
    local ok, remaining, retry, reset, delay, kind, x, y, z, w, v
    if cost == 0 then ok, remaining, retry, reset, delay = 1, 0, 0, 0, 0  -- only charges debts
    elseif algo == 3 then ok, remaining, retry, reset, delay, kind, x, y, z = fixed(key, L, W, cost)
    elseif algo == 5 then
      ok, remaining, retry, reset, delay, kind, x, y, z, w = counter(key, L, W, cost)
    elseif algo == 6 then ok, remaining, retry, reset, delay, kind, x, y = gcra(key, L, W, cost)
    elseif algo == 0 or algo == 1 then
      ok, remaining, retry, reset, delay, kind, x, y, z = bucket(key, L, W, cost, algo == 1)
    elseif algo == 4 then
      ok, remaining, retry, reset, delay, kind, x, y, z, w, v = log(key, L, W, cost)
    else
      ok, remaining, retry, reset, delay, kind, x, y =
          queue(key, L, W, tonumber(ARGV[b + 4]), cost)
    end
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = ok, remaining, retry, reset, delay
    o = o + 5
    if ok == 1 then
      if kind then
        pending[p + 1], pending[p + 2], pending[p + 3], pending[p + 4] = key, kind, x, y
        pending[p + 5], pending[p + 6], pending[p + 7] = z, w, v
        p = p + 7
      end
    elseif ARGV[b + 6] ~= '1' then all = false end
  end
  if all then
    for j = 0, p - 1, 7 do
      commit(pending[j + 1], pending[j + 2], pending[j + 3], pending[j + 4], pending[j + 5],
             pending[j + 6], pending[j + 7])
    end
  end
  return o
end

local out, o = {}, 0
local k0, a = 0, 3
for _ = 1, tonumber(ARGV[2]) do
  now = tonumber(ARGV[a])
  local n = tonumber(ARGV[a + 1])
  o = decide(k0, a + 1, n, out, o)
  k0 = k0 + n
  a = a + 2 + 7 * n
end
return out
)lua";

}  // namespace tweetsearch::limiter

#endif  // TWEETSEARCH_LIMITER_REDIS_SCRIPT_H_
