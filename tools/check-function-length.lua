-- No Lua function of the library longer than a bound (default 100 lines),
-- counted from the compiler's own listing (`luac -p -l` names each
-- function with its first and last line), so that a function that grows
-- past what one reads at once is split by what it does. `make lint` runs it.
--   lua tools/check-function-length.lua LUAC MAX FILE...   (exit 1, with each long one)
local luac, max = arg[1], tonumber(arg[2])
local bad = 0
for i = 3, #arg do
  local p = assert(io.popen(("%s -p -l '%s' 2>&1"):format(luac, arg[i])))
  for line in p:lines() do
    local file, first, last = line:match("^function <(.-):(%d+),(%d+)>")
    if file then
      local n = tonumber(last) - tonumber(first) + 1
      if n > max then
        io.stderr:write(("%s:%s: a function of %d lines (at most %d: split it by what it does)\n")
                        :format(file, first, n, max))
        bad = bad + 1
      end
    end
  end
  p:close()
end
if bad > 0 then os.exit(1) end
