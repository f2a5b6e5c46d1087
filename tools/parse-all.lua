-- Parses every Lua file given with the interpreter running this script
-- (luajit, lua5.3): shared Lua code must load on every supported runtime.
--   luajit tools/parse-all.lua lua/perfev/*.lua spec/*.lua ...
-- Exits 1 after listing every file that does not parse.
local bad = 0
for _, f in ipairs(arg) do
  local ok, err = loadfile(f)
  if not ok then
    bad = bad + 1
    io.stderr:write(err, "\n")
  end
end
if bad > 0 then
  io.stderr:write(("%d of %d files do not parse under %s\n"):format(bad, #arg,
    type(rawget(_G, "jit")) == "table" and rawget(_G, "jit").version or _VERSION))
  os.exit(1)
end
