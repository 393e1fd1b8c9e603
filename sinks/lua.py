"""Lua scripts the Redis sink runs: each makes one record's writes atomic and idempotent.

A script runs as one unit in Redis, so a check ("was this transition written?", "is the
stored status newer?") and the writes it guards cannot be split by a crash or a replay.
Every key a script touches is passed in KEYS.
"""

# Append a point at entry id '<ts>-0' unless the stream already holds that ts or a later
# one: XADD refuses an id that is not greater than the top item, and that refusal is what
# makes a replayed point (or a late, older one) a no-op. Returns 1 if appended, else 0.
_XADD_AT = """
local function xadd_at(key, maxlen, ts, fields)
  local r = redis.pcall('XADD', key, 'MAXLEN', '~', maxlen, ts .. '-0', unpack(fields))
  if type(r) == 'table' and r.err then
    if string.find(r.err, 'equal or smaller', 1, true) then return 0 end
    return redis.error_reply(r.err)
  end
  return 1
end
"""

# Apply one partition_status or replica_status record.
# KEYS: 1 status hash, 2 series stream, 3.. index and membership sets
# ARGV: 1 ts, 2 series maxlen, 3 #hash args, 4 #series args, 5 #index adds, then
#   hash field/value pairs, series field/value pairs,
#   index adds as (KEYS number, member), then memberships as (KEYS number, member, '1'|'0').
# Returns {applied, point appended}. A record older than the stored one changes nothing, so
# a replayed older batch cannot roll the state back; an equal ts rewrites the same values.
APPLY_STATUS = _XADD_AT + """
local ts = tonumber(ARGV[1])
local stored = redis.call('HGET', KEYS[1], 'ts')
if stored and tonumber(stored) > ts then return {0, 0} end
local nh, ns, na = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local i = 6
redis.call('HSET', KEYS[1], unpack(ARGV, i, i + nh - 1))
i = i + nh
local appended = 0
if ns > 0 then
  local series = {}
  for j = i, i + ns - 1 do series[#series + 1] = ARGV[j] end
  appended = xadd_at(KEYS[2], ARGV[2], ARGV[1], series)
  if type(appended) == 'table' then return appended end
end
i = i + ns
for _ = 1, na do
  redis.call('SADD', KEYS[tonumber(ARGV[i])], ARGV[i + 1])
  i = i + 2
end
while i <= #ARGV do
  if ARGV[i + 2] == '1' then
    redis.call('SADD', KEYS[tonumber(ARGV[i])], ARGV[i + 1])
  else
    redis.call('SREM', KEYS[tonumber(ARGV[i])], ARGV[i + 1])
  end
  i = i + 3
end
return {1, appended}
"""

# Forget followers no longer assigned to a partition (after a reassignment), so they leave
# the replica index and the out-of-sync set. Runs only if the partition hash holds this ts,
# i.e. this partition_status is the current one.
# KEYS: 1 partition hash, 2 replicas set, 3 out-of-sync set
# ARGV: 1 ts, 2 member prefix 'topic:partition:', 3.. assigned replica ids
PRUNE_REPLICAS = """
if redis.call('HGET', KEYS[1], 'ts') ~= ARGV[1] then return 0 end
local assigned = {}
for j = 3, #ARGV do assigned[ARGV[j]] = true end
local pruned = 0
for _, replica in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if not assigned[replica] then
    redis.call('SREM', KEYS[2], replica)
    redis.call('SREM', KEYS[3], ARGV[2] .. replica)
    pruned = pruned + 1
  end
end
return pruned
"""

# Write one alert transition once.
# KEYS: 1 seen(alert, status), 2 seen(alert, 'resolved'), 3 alerts stream,
#       4 firing hash, 5 firing hash of the cluster
# ARGV: 1 alert_id, 2 status, 3 alert JSON, 4 seen TTL s, 5 stream maxlen, 6 channel,
#       7.. stream field/value pairs
# Returns 1 if written, 0 if this transition was written before.
WRITE_ALERT = """
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[4]) then return 0 end
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', unpack(ARGV, 7))
if ARGV[2] == 'firing' then
  -- a firing that arrives after its own resolve is history, not a firing alert
  if redis.call('EXISTS', KEYS[2]) == 0 then
    redis.call('HSET', KEYS[4], ARGV[1], ARGV[3])
    redis.call('HSET', KEYS[5], ARGV[1], ARGV[3])
  end
else
  redis.call('HDEL', KEYS[4], ARGV[1])
  redis.call('HDEL', KEYS[5], ARGV[1])
end
redis.call('PUBLISH', ARGV[6], ARGV[3])
return 1
"""

# Write one quarantined record once.
# KEYS: 1 seen(record id), 2 quarantine stream, 3 counter
# ARGV: 1 seen TTL s, 2 stream maxlen, 3.. stream field/value pairs
WRITE_QUARANTINE = """
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then return 0 end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', unpack(ARGV, 3))
redis.call('INCR', KEYS[3])
return 1
"""

# Append one point of a cluster's counts, read from the sets the statuses maintain.
# KEYS: 1 cluster series, 2 under-replicated set, 3 under-min-isr set, 4 out-of-sync set,
#       5 firing hash of the cluster
# ARGV: 1 ts, 2 series maxlen
CLUSTER_POINT = _XADD_AT + """
return xadd_at(KEYS[1], ARGV[2], ARGV[1], {
  'under_replicated', redis.call('SCARD', KEYS[2]),
  'under_min_isr', redis.call('SCARD', KEYS[3]),
  'out_of_sync_replicas', redis.call('SCARD', KEYS[4]),
  'firing_alerts', redis.call('HLEN', KEYS[5])})
"""
