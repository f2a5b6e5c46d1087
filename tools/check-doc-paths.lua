-- Every path of the tree a document names exists: `csrc/x.c`, `lua/perfev/y.lua`,
-- `spec/z_spec.lua`, `examples/...`, `bench/...`, `tools/...` (a `*` in one
-- must match a file), so that README.md and doc/ cannot point at files that
-- were renamed or removed. `make lint` runs it.
--   lua tools/check-doc-paths.lua DOC...   (exit 1, with each stale path)
local ROOTS = { "csrc", "lua", "spec", "examples", "bench", "tools", "doc", "bin", "fuzz" }
-- paths that are not the tree's: perf's own sources (tools/perf/, tools/lib/
-- in the kernel tree), and what a command creates (fuzz/crashes/)
local ELSEWHERE = { "^tools/perf/", "^tools/perf$", "^tools/lib/", "^fuzz/crashes" }
local function elsewhere(path)
  for _, p in ipairs(ELSEWHERE) do if path:match(p) then return true end end
  return false
end

local function exists(path)
  if path:find("*", 1, true) then
    local p = io.popen("ls -d " .. path .. " 2>/dev/null")
    local out = p:read("*a")
    p:close()
    return out ~= ""
  end
  local f = io.open(path, "r")
  if f then f:close() return true end
  return false
end

local bad = 0
for _, doc in ipairs({ ... }) do
  local n = 0
  for line in io.lines(doc) do
    n = n + 1
    for _, root in ipairs(ROOTS) do
      for path in line:gmatch("%f[%w_./-]" .. root .. "/[%w_./*-]*[%w_*]") do
        -- a path given relative to the document's own folder is not the tree's
        if (not path:match("^doc/") or doc:match("^README")) and not elsewhere(path) then
          local clean = path:gsub("[.:]+$", "")
          if not exists(clean) and not exists((doc:match("^(.*)/") or ".") .. "/" .. clean) then
            io.stderr:write(("%s:%d: %s does not exist\n"):format(doc, n, clean))
            bad = bad + 1
          end
        end
      end
    end
  end
end
if bad > 0 then os.exit(1) end
