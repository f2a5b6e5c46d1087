-- The Lua code of examples/openresty/nginx.conf's /work/split location: two
-- functions whose CPU costs are 1:3 by construction (the same loop, a
-- quarter and three quarters of the iterations), to profile with
-- perfev.resty's profile_* (doc/openresty.md).
-- luacheck: globals ngx
local M = {}

local function spin(n)
  local s = 0
  for i = 1, n do
    s = s + i % 7
  end
  return s
end

local function cheap()
  local r = spin(250000)
  return r
end

local function dear()
  local r = spin(750000)
  return r
end

-- content_by_lua: the work of one request
function M.split()
  local r = cheap() + dear()
  ngx.say("split ", r)
end

return M
