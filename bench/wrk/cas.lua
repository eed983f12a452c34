-- A compare-and-swap put: expect a version that is usually stale, so most answers are
-- applied:false, reason "version". It still travels through the log like any write.
dofile(os.getenv("HIVEKV_BENCH_DIR") .. "/common.lua")
request = function()
  local key = "k" .. math.random(1, keys)
  local body = '{"operations":[{"op":"put","ns":"bench","key":"' .. key ..
    '","value":' .. value .. ',"forever":true,"expect":' .. math.random(1, 200000) .. '}]}'
  return wrk.format("POST", "/api/v1/kv", headers, body)
end
