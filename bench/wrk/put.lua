dofile(os.getenv("HIVEKV_BENCH_DIR") .. "/common.lua")
request = function()
  local key = "k" .. math.random(1, keys)
  local body = '{"operations":[{"op":"put","ns":"bench","key":"' .. key ..
    '","value":' .. value .. ',"forever":true}]}'
  return wrk.format("POST", "/api/v1/kv", headers, body)
end
