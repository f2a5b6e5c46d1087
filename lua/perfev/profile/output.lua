-- The profile's outputs, by format name or by the output file's name.
local options = require "perfev.options"

local M = {}

-- Suffix -> format, longest first (".speedscope.json" before ".json").
M.FORMATS = {
  { suffix = ".speedscope.json", format = "speedscope" },
  { suffix = ".svg", format = "svg" },
  { suffix = ".folded", format = "folded" },
  { suffix = ".pb.gz", format = "pprof" },
  { suffix = ".data", format = "perfdata" },
  { suffix = ".txt", format = "text" },
}

local MODULES = {
  speedscope = "perfev.profile.speedscope", svg = "perfev.profile.svg",
  folded = "perfev.profile.folded", pprof = "perfev.profile.pprof",
  perfdata = "perfev.profile.perfdata", text = "perfev.profile.text",
}

local function suffixes()
  local t = {}
  for i, f in ipairs(M.FORMATS) do t[i] = f.suffix end
  return table.concat(t, ", ")
end

-- format_of(path) -> format name, or nil and a message naming the suffixes.
function M.format_of(path)
  options.arg(path, "string", "perfev.profile.format_of", "the path")
  for _, f in ipairs(M.FORMATS) do
    if path:sub(-#f.suffix) == f.suffix then return f.format end
  end
  if path == "-" then return "text" end
  return nil, ("cannot tell the format of '%s' from its name (%s)"):format(path, suffixes())
end

local function module(fmt)
  local m = MODULES[fmt]
  if not m then
    options.raise(("perfev.profile: unknown format '%s' (speedscope, svg, folded, pprof, perfdata, text)")
                  :format(tostring(fmt)))
  end
  return require(m)
end

-- format(profile, fmt) -> bytes (every format but perfdata, which is a file)
function M.format(p, fmt)
  if fmt == "perfdata" then options.raise("perfev.profile: perf.data is written to a file: use write") end
  return (module(fmt).encode(p))
end

-- write(profile, path[, fmt]) -> true | nil, message, errno; "-": stdout
function M.write(p, path, fmt)
  if type(path) ~= "string" then options.raise("perfev.profile: write: path must be a string") end
  if not fmt then
    local msg
    fmt, msg = M.format_of(path)
    if not fmt then options.raise("perfev.profile: " .. msg) end
  end
  local m = module(fmt)
  if m.write then return m.write(p, path) end
  local bytes = m.encode(p)
  if path == "-" then
    io.stdout:write(bytes)
    return true
  end
  local f, msg, errno = io.open(path, "wb")
  if not f then return nil, "perfev.profile: " .. msg, errno end
  local ok, wmsg, werrno = f:write(bytes)
  local cok, cmsg, cerrno = f:close()
  if not ok then return nil, "perfev.profile: " .. path .. ": " .. tostring(wmsg), werrno end
  if not cok then return nil, "perfev.profile: " .. path .. ": " .. tostring(cmsg), cerrno end
  return true
end

return M
