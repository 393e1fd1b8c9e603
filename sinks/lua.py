"""Lua scripts the Redis sink runs: they make each record's writes atomic and idempotent.

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

# Apply partition_status or replica_status records, many per call (one JSON array each, so
# a call carries a few arguments per record rather than dozens).
# KEYS: every key the records name, each once
# ARGV: 1 series maxlen, 2.. one record each:
#   [hash KEYS no, series KEYS no, ts, [hash field, value, ...], [series field, value, ...],
#    [set KEYS no, member, ...] to add, [set KEYS no, member, '1'|'0', ...] memberships,
#    [] or [replicas set KEYS no, out-of-sync set KEYS no, member prefix, assigned id, ...],
#    1 when the sink left out the index adds and the prune (it sent them for this hash before)]
# A record older than the stored one changes nothing, so a replayed older batch cannot roll
# the state back; an equal ts rewrites the same values. The prune forgets followers no
# longer assigned to the partition (after a reassignment), so they leave the replica index
# and the out-of-sync set.
# Returns one string, three digits per record in order: applied, point appended, index wanted
# (index wanted is 1 when the sink left the index adds out but the hash did not exist: Redis
# was flushed, or the keys deleted; the sink then sends the record again with them). One
# reply element per call, not four per record: at a monitor's start every partition's first
# statuses go out at once, and the client read each element on its own.
APPLY_STATUSES = (
    _XADD_AT
    + """
local results = {}
for n = 2, #ARGV do
  local r = cjson.decode(ARGV[n])
  local hash, ts = KEYS[r[1]], r[3]
  local stored = redis.call('HGET', hash, 'ts')
  if stored and tonumber(stored) > tonumber(ts) then
    results[#results + 1] = '000'
  else
    redis.call('HSET', hash, unpack(r[4]))
    local appended = 0
    if #r[5] > 0 then
      appended = xadd_at(KEYS[r[2]], ARGV[1], ts, r[5])
      if type(appended) == 'table' then return appended end
    end
    local adds, members, prune = r[6], r[7], r[8]
    for j = 1, #adds, 2 do redis.call('SADD', KEYS[adds[j]], adds[j + 1]) end
    for j = 1, #members, 3 do
      redis.call(members[j + 2] == '1' and 'SADD' or 'SREM', KEYS[members[j]], members[j + 1])
    end
    if #prune > 0 then
      local assigned = {}
      for j = 4, #prune do assigned[prune[j]] = true end
      for _, replica in ipairs(redis.call('SMEMBERS', KEYS[prune[1]])) do
        if not assigned[replica] then
          redis.call('SREM', KEYS[prune[1]], replica)
          redis.call('SREM', KEYS[prune[2]], prune[3] .. replica)
        end
      end
    end
    results[#results + 1] = '1' .. appended .. ((r[9] == 1 and not stored) and '1' or '0')
  end
end
return table.concat(results)
"""
)

# Write one alert transition once.
# KEYS: 1 seen(alert, status), 2 seen(alert, 'resolved'), 3 alerts stream,
#       4 firing hash, 5 firing hash of the cluster
# ARGV: 1 alert_id, 2 status, 3 alert JSON, 4 seen TTL s, 5 stream maxlen, 6 channel,
#       7.. stream field/value pairs
# Returns 1 if written, 0 if this transition was written before.
# Redis does not undo a script's writes when a later command fails (a missing ACL permission,
# out of memory), so the guard is set last: a script that fails midway is redone in full by
# the replay, which may repeat a stream entry but never loses the publish or the firing hash.
WRITE_ALERT = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', unpack(ARGV, 7))
if ARGV[2] == 'firing' or ARGV[2] == 'updated' then
  -- a firing (or an update of one) that arrives after its own resolve is history, not a
  -- firing alert
  if redis.call('EXISTS', KEYS[2]) == 0 then
    redis.call('HSET', KEYS[4], ARGV[1], ARGV[3])
    redis.call('HSET', KEYS[5], ARGV[1], ARGV[3])
  end
else
  redis.call('HDEL', KEYS[4], ARGV[1])
  redis.call('HDEL', KEYS[5], ARGV[1])
end
redis.call('PUBLISH', ARGV[6], ARGV[3])
redis.call('SET', KEYS[1], '1', 'EX', ARGV[4])
return 1
"""

# Write one quarantined record once (guard set last, as for alerts).
# KEYS: 1 seen(record id), 2 quarantine stream, 3 counter
# ARGV: 1 seen TTL s, 2 stream maxlen, 3.. stream field/value pairs
WRITE_QUARANTINE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', unpack(ARGV, 3))
redis.call('INCR', KEYS[3])
redis.call('SET', KEYS[1], '1', 'EX', ARGV[1])
return 1
"""

# Append one point of a cluster's counts, read from the sets the statuses maintain.
# KEYS: 1 cluster series, 2 under-replicated set, 3 under-min-isr set, 4 out-of-sync set,
#       5 firing hash of the cluster
# ARGV: 1 ts, 2 series maxlen
# Series points of healthy partitions (series_point records): a point each, nothing else.
# KEYS: the series streams, each once; ARGV: 1 series maxlen, 2.. [KEYS no, ts, [field, value, ...]]
# Returns how many points were appended (a replayed or older point is not).
APPEND_POINTS = (
    _XADD_AT
    + """
local appended = 0
for n = 2, #ARGV do
  local r = cjson.decode(ARGV[n])
  local one = xadd_at(KEYS[r[1]], ARGV[1], r[2], r[3])
  if type(one) == 'table' then return one end
  appended = appended + one
end
return appended
"""
)

CLUSTER_POINT = (
    _XADD_AT
    + """
return xadd_at(KEYS[1], ARGV[2], ARGV[1], {
  'under_replicated', redis.call('SCARD', KEYS[2]),
  'under_min_isr', redis.call('SCARD', KEYS[3]),
  'out_of_sync_replicas', redis.call('SCARD', KEYS[4]),
  'firing_alerts', redis.call('HLEN', KEYS[5])})
"""
)

# Replace one broker's restart-gate verdict unless the stored one is newer (a replayed batch
# cannot roll it back; the same clock rewrites the same values).
# KEYS: 1 the verdict hash
# ARGV: 1 clock_ms, 2.. field/value pairs
# Returns 1 if written, else 0.
WRITE_VERDICT = """
local stored = redis.call('HGET', KEYS[1], 'clock_ms')
if stored and tonumber(stored) > tonumber(ARGV[1]) then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
return 1
"""
