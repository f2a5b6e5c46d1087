-- luacheck configuration: `make lint` runs `luacheck lua spec examples bench tools`.
std = "lua54"
max_line_length = 120
exclude_files = { "build/**", ".luarocks/**", "lua_modules/**" }

files["spec"] = { std = "+busted" }
-- OpenResty's API, in the module made for it and its example's conf
files["lua/perfev/resty.lua"] = { globals = { "ngx" } }
