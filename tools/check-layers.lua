-- The C core's layering, checked from what its files use of each other:
-- a file of csrc/ uses another when it names a non-static function, a
-- global, a macro, a type (struct, enum, typedef) or an enum constant that
-- the other defines (not when it only includes it, nor when a header only
-- declares a function's prototype). Each folder of csrc/ is one concern;
-- each base file at the top (with its header: cursor.c, cursor.h) is one
-- of its own. A circle between concerns (A uses
-- B, which uses A, through any chain) is a layering fault: `make lint`
-- fails naming the uses that close it. Circles inside one folder are left
-- alone.
--   lua tools/check-layers.lua csrc/a.c csrc/b/c.h ...   (exit 1 on a circle)
--   lua tools/check-layers.lua -v FILES...                (also every use between concerns)
local verbose = false
local files = {}
for _, a in ipairs({ ... }) do
  if a == "-v" then verbose = true else files[#files + 1] = a end
end

local ccode = dofile((arg[0]:match("^(.*/)") or "") .. "c-code.lua")
local read, strip = ccode.read, ccode.strip

local function concern(path)
  local rel = path:gsub("^csrc/", "")
  return rel:match("^([^/]+)/") or (rel:gsub("%.[ch]$", ""))
end

local owner = {}    -- symbol -> file that defines it
local code = {}     -- file -> stripped code
local own = {}      -- file -> { symbol = true } it defines or declares itself

local function define(file, name)
  own[file][name] = true
  if not owner[name] or (owner[name]:match("%.h$") and file:match("%.c$")) then
    owner[name] = owner[name] and owner[name]:match("%.c$") and owner[name] or file
  end
end

local KEYWORDS = {}
for w in ([[if while for switch return sizeof do else case default goto break continue
  static inline extern const volatile struct union enum typedef unsigned signed int char
  short long float double void _Bool _Atomic _Thread_local __attribute__ defined]]):gmatch("%S+") do
  KEYWORDS[w] = true
end

-- What a file defines: macros (of headers), types, enum constants, and
-- the functions and globals with external linkage (or static inline in a
-- header: every includer gets them).
local function scan(file, s)
  local header = file:match("%.h$")
  own[file] = {}
  for line in s:gmatch("[^\n]*") do
    local name = line:match("^%s*#%s*define%s+([%a_][%w_]*)")
    if name then
      if header then define(file, name) else own[file][name] = true end
    end
  end
  local body = s:gsub("\n%s*#[^\n]*", "\n")
  for name in body:gmatch("struct%s+([%a_][%w_]*)%s*{") do define(file, "struct " .. name) end
  for name in body:gmatch("union%s+([%a_][%w_]*)%s*{") do define(file, "union " .. name) end
  for name, inner in body:gmatch("enum%s*([%a_]*[%w_]*)%s*(%b{})") do
    if name ~= "" then define(file, "enum " .. name) end
    for const in inner:gmatch("([%a_][%w_]*)%s*[=,}]") do
      if header then define(file, const) else own[file][const] = true end
    end
  end
  for name in body:gmatch("typedef[^;]-([%a_][%w_]*)%s*;") do define(file, name) end
  for name in body:gmatch("typedef[^;]-%(%s*%*%s*([%a_][%w_]*)%s*%)") do define(file, name) end
  -- top level: function definitions and globals, by brace depth
  local depth, stmt = 0, {}
  local i, n = 1, #body
  while i <= n do
    local c = body:sub(i, i)
    if c == "{" then
      if depth == 0 then
        local head = table.concat(stmt)
        local fname = head:match("([%a_][%w_]*)%s*%b()%s*$")
        if fname and not KEYWORDS[fname] then
          local static = head:match("%f[%w_]static%f[^%w_]")
          own[file][fname] = true
          if not static or header then define(file, fname) end
        end
        stmt = {}
      end
      depth = depth + 1
    elseif c == "}" then
      depth = depth - 1
      if depth == 0 then stmt = {} end
    elseif c == ";" and depth == 0 then
      local st = table.concat(stmt)
      stmt = {}
      if not st:match("^%s*typedef") then
        -- a global: name [ ... ] = or name = (not extern, not a prototype)
        local gname = st:match("([%a_][%w_]*)%s*%b[]%s*=") or st:match("([%a_][%w_]*)%s*=")
        if gname and not st:match("%f[%w_]extern%f[^%w_]") then
          own[file][gname] = true
          if not st:match("%f[%w_]static%f[^%w_]") then define(file, gname) end
        end
        -- a prototype or an extern declaration: the name is not a use
        local proto = st:match("([%a_][%w_]*)%s*%b()%s*$")
          or st:match("([%a_][%w_]*)%s*%b()%s*__attribute__%s*%b()%s*$")
        if proto then own[file][proto] = true end
        local ext = st:match("%f[%w_]extern%f[^%w_].-([%a_][%w_]*)%s*%b[]%s*$")
          or st:match("%f[%w_]extern%f[^%w_].-([%a_][%w_]*)%s*$")
        if ext then own[file][ext] = true end
      end
    elseif depth == 0 then
      stmt[#stmt + 1] = c
    end
    i = i + 1
  end
end

for _, f in ipairs(files) do
  code[f] = strip(read(f))
  scan(f, code[f])
end

-- Who uses whom: file -> other file -> the first symbol seen.
local uses = {}
for _, f in ipairs(files) do
  uses[f] = {}
  local s = code[f]:gsub("\n%s*#%s*include[^\n]*", "\n")
  local function use(name)
    local o = owner[name]
    if o and o ~= f and not own[f][name] and not uses[f][o] then uses[f][o] = name end
  end
  for kind, name in s:gmatch("(%a+)%s+([%a_][%w_]*)") do
    if kind == "struct" or kind == "union" or kind == "enum" then use(kind .. " " .. name) end
  end
  for name in s:gmatch("[%a_][%w_]*") do use(name) end
end

-- Between concerns: concern -> concern -> { "file uses file (symbol)", ... }.
local edges, concerns = {}, {}
for _, f in ipairs(files) do
  local a = concern(f)
  concerns[a] = true
  edges[a] = edges[a] or {}
  for g, sym in pairs(uses[f]) do
    local b = concern(g)
    if a ~= b then
      edges[a][b] = edges[a][b] or {}
      table.insert(edges[a][b], ("%s uses %s (%s)"):format(f, g, sym))
    end
  end
end

-- Tarjan's strongly connected components over the concerns.
local names = {}
for c in pairs(concerns) do names[#names + 1] = c end
table.sort(names)
local index, low, onstack, stack, comps, counter = {}, {}, {}, {}, {}, 0
local function connect(v)
  counter = counter + 1
  index[v], low[v] = counter, counter
  stack[#stack + 1] = v
  onstack[v] = true
  local targets = {}
  for w in pairs(edges[v] or {}) do targets[#targets + 1] = w end
  table.sort(targets)
  for _, w in ipairs(targets) do
    if not index[w] then
      connect(w)
      if low[w] < low[v] then low[v] = low[w] end
    elseif onstack[w] and index[w] < low[v] then
      low[v] = index[w]
    end
  end
  if low[v] == index[v] then
    local comp = {}
    repeat
      local w = table.remove(stack)
      onstack[w] = nil
      comp[#comp + 1] = w
    until w == v
    if #comp > 1 then table.sort(comp) comps[#comps + 1] = comp end
  end
end
for _, v in ipairs(names) do if not index[v] then connect(v) end end

if verbose then
  for _, a in ipairs(names) do
    local bs = {}
    for b in pairs(edges[a] or {}) do bs[#bs + 1] = b end
    table.sort(bs)
    if #bs > 0 then print(a .. " -> " .. table.concat(bs, " ")) end
  end
end

if #comps > 0 then
  for _, comp in ipairs(comps) do
    local set = {}
    for _, c in ipairs(comp) do set[c] = true end
    io.stderr:write("check-layers: a circle between concerns of csrc/: ", table.concat(comp, ", "), "\n")
    for _, a in ipairs(comp) do
      local bs = {}
      for b in pairs(edges[a]) do if set[b] then bs[#bs + 1] = b end end
      table.sort(bs)
      for _, b in ipairs(bs) do
        table.sort(edges[a][b])
        io.stderr:write(("  %s -> %s: %s%s\n"):format(a, b, edges[a][b][1],
          #edges[a][b] > 1 and (" and %d more"):format(#edges[a][b] - 1) or ""))
      end
    end
  end
  os.exit(1)
end
