-- The soak mix: mostly reads, a steady trickle of writes (which the embedding worker follows).
dofile(os.getenv("BENCH_LUA_DIR") .. "/report.lua")
request = function()
  local r = math.random(1, 100)
  if r <= 15 then return bench_post_episode() end
  if r <= 45 then return wrk.format("GET", "/episodes/" .. math.random(1, bench_max_id)) end
  if r <= 65 then
    return wrk.format("GET", "/sessions/" .. math.random(1, bench_sessions) .. "/episodes?limit=20")
  end
  if r <= 85 then return wrk.format("GET", "/episodes/search?q=" .. bench_urlencode(bench_query())) end
  return bench_search_body()
end
