-- perfev.resty.ngx: ngx_lua's API for the modules that run in nginx
-- (perfev.resty, perfev.profile.resty, perfev.profile.scrape) when they
-- are loaded where it is not: a call that needs it says so, at the
-- caller's line, rather than "attempt to index a nil value (global
-- 'ngx')". A global ngx set later (a test's stand-in) is used. Each of
-- those modules takes `rawget(_G, "ngx") or require "perfev.resty.ngx"`:
-- in nginx, the real table.
local options = require "perfev.options"

return setmetatable({}, { __index = function(_, k)
  local late = rawget(_G, "ngx")
  if late then return late[k] end
  options.raisef("perfev.resty: ngx.%s is not there: perfev.resty runs inside nginx, with ngx_lua "
                 .. "(OpenResty, or nginx's lua module), not in a plain Lua", tostring(k))
end })
