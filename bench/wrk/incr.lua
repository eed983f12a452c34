dofile(os.getenv("HIVEKV_BENCH_DIR") .. "/common.lua")
request = function()
  local key = "c" .. math.random(1, keys)
  local body = '{"operations":[{"op":"incr","ns":"bench","key":"' .. key ..
    '","delta":1,"max":1000000000,"ttlSeconds":3600}]}'
  return wrk.format("POST", "/api/v1/kv", headers, body)
end
