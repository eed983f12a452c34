dofile(os.getenv("HIVEKV_BENCH_DIR") .. "/common.lua")
request = function()
  local ops = {}
  local base = math.random(0, keys - 16)
  for i = 1, 16 do
    ops[i] = '{"op":"put","ns":"bench","key":"k' .. (base + i) .. '","value":' .. value ..
      ',"forever":true}'
  end
  return wrk.format("POST", "/api/v1/kv", headers, '{"operations":[' .. table.concat(ops, ",") .. ']}')
end
