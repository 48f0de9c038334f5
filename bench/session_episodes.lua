dofile(os.getenv("BENCH_LUA_DIR") .. "/report.lua")
request = function()
  return wrk.format("GET", "/sessions/" .. math.random(1, bench_sessions) .. "/episodes?limit=20")
end
