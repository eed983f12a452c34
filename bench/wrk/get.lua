dofile(os.getenv("HIVEKV_BENCH_DIR") .. "/common.lua")
request = function()
  local key = "k" .. math.random(1, keys)
  return wrk.format("POST", "/api/v1/kv", headers,
    '{"operations":[{"op":"get","ns":"bench","key":"' .. key .. '"}]}')
end
