-- coroutine.resume and coroutine.wrap replaced while a profiler runs by
-- the two its wrappers(resume, wrap) makes (the C profilers' come from
-- csrc/profiler/cotrack.c, LuaJIT's collector's from perfev.profile.jit),
-- so that it knows which coroutine runs; put in and taken out here for
-- every engine (profile/hook.lua, profile/jit.lua, alloc.lua,
-- alloc/luajit.lua).
local M = {}

local NAMES = { "resume", "wrap" }

-- install(obj) -> handle: obj:wrappers(resume, wrap)'s two in place of
-- the coroutine library's (rawset: a strict global table is no matter)
function M.install(obj)
  local co = coroutine
  local saved = { resume = co.resume, wrap = co.wrap }
  local resume, wrap = obj:wrappers(co.resume, co.wrap)
  rawset(co, "resume", resume)
  rawset(co, "wrap", wrap)
  return { saved = saved, mine = { resume = resume, wrap = wrap } }
end

-- restore(handle): the functions install found back, each unless it was
-- replaced meanwhile (by another tool, which keeps its own)
function M.restore(h)
  if not h then return end
  local co = coroutine
  for _, k in ipairs(NAMES) do
    if co[k] == h.mine[k] then rawset(co, k, h.saved[k]) end
  end
end

return M
