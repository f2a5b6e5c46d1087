-- native = true: each sample's kernel callchain (user and kernel frames)
-- under the Lua frames of the same sample, symbolized from the ELF symbol
-- tables of the files this process maps (/proc/self/maps, perfev.symbols:
-- .symtab where a file or its -dbg package has one, else .dynsym) and
-- /proc/kallsyms when it is readable.
--
-- The callchain holds the whole C stack, down to main: the interpreter's
-- frames that run the Lua frames already shown are left out. Going out
-- from the innermost frame, a frame is kept while it is outside the
-- interpreter (libc, a C module, the kernel), or in it and named, until
-- the interpreter's dispatch (luaV_execute, luaD_precall, LuaJIT's lj_vm_*
-- ...). An interpreter frame with no symbol (Debian's lua5.4 is stripped:
-- .dynsym names its API alone) ends the native part as one frame
-- "[lua5.4 (stripped)]": what function it is, is not guessed. Unnamed
-- frames of other stripped files show the same way, one per run.
local symbols = require "perfev.symbols"
local elf = require "perfev.elf"
local fs = require "perfev.fs"

local M = {}

-- Where the interpreter dispatches Lua calls: the native part stops below it.
local DISPATCH = {
  luaV_execute = true, luaD_precall = true, luaD_call = true, luaD_callnoyield = true,
  precallC = true, ccall = true, luaD_rawrunprotected = true, luaD_pcall = true,
  lua_pcallk = true, lua_callk = true, lua_pcall = true, lua_call = true, lua_resume = true,
}
local DISPATCH_PREFIX = { "lj_vm_", "lj_BC_", "lj_ff_", "lj_fff_", "lj_cont_" }

local function dispatch(name)
  if DISPATCH[name] then return true end
  for _, p in ipairs(DISPATCH_PREFIX) do
    if name:sub(1, #p) == p then return true end
  end
  return false
end

-- A symbolizer over the maps of process pid (this one by default), with
-- what it knows of each dso.
local function new_resolver(pid)
  local S = symbols.new {}
  pid = pid or fs.own_pid()
  assert(S:proc(pid))
  local info = {}          -- dso -> { interp = bool, stripped = bool }
  local function dso_info(d)
    local i = info[d]
    if i then return i end
    i = { interp = false, stripped = false }
    if d.kind ~= "kernel" and d.kind ~= "kernel-module" and d.name:sub(1, 1) == "/" then
      local t = S:table(d)
      -- the interpreter: the file that defines the Lua API (the lua5.4
      -- executable, libluajit, a host linking liblua.a)
      i.interp = (t:index("lua_pushvalue") or t:index("lua_newstate")) ~= nil
      local x = elf.inspect(d.origin or d.name)
      i.stripped = not (x and x.symtab)
    end
    info[d] = i
    return i
  end
  return function(ip, space)
    local e = symbols.fast.resolve(S, pid, ip, space == "kernel" and "kernel" or "user")
    return e, dso_info(e.dso)
  end
end

-- The frame of a native address: { name, source (the dso), what }.
local function native_frame(e, i, space)
  local what = space == "kernel" and "kernel" or "native"
  local dso = e.dso.short
  if e.name then return { name = e.name, source = dso, what = what }, true end
  if i.stripped then
    return { name = ("[%s (stripped)]"):format(dso), source = dso, what = what, stripped = true }, false
  end
  if dso:sub(1, 1) ~= "[" then dso = "[" .. dso .. "]" end     -- [kernel.kallsyms], [unknown]
  return { name = dso, source = e.dso.short, what = what, stripped = true }, false
end

-- The native part of one stack (frames outermost first) -> frames kept,
-- outermost first. The kernel frames are all kept (the kernel unwinds
-- itself reliably), and the user frame the sample was taken in (its exact
-- address). The user frames past it come from the kernel walking frame
-- pointers, which code built without them (Debian's libc, lua5.4) does
-- not keep: a caller is kept only while it lies in a mapped file and has
-- a symbol (or is the interpreter, shown as such); the first one that
-- does not ends the native part.
local function trim(natives, resolve)
  local kept, users = {}, 0
  for i = #natives, 1, -1 do
    local f = natives[i]
    local e, info = resolve(f.ip, f.what)
    local fr, named = native_frame(e, info, f.what)
    if f.what ~= "kernel" then
      users = users + 1
      if users > 1 and not named and not info.interp then break end
    end
    if info.interp and named and dispatch(fr.name) then break end
    local last = kept[#kept]
    if not (last and last.stripped and fr.stripped and last.name == fr.name) then
      kept[#kept + 1] = fr
    end
    if info.interp and not named then break end
  end
  local out = {}
  for i = #kept, 1, -1 do out[#out + 1] = kept[i] end
  return out
end

-- symbolize(raw [, pid]) -> raw with its native frames named and trimmed
-- (see above), the stacks that became equal merged; pid: the process whose
-- maps the addresses are in (perfev.attach's target; default this one).
-- out.into[i]: the position in out.stacks of raw.stacks[i] (a timeline's
-- samples, which name their stacks by position).
function M.symbolize(raw, pid)
  local resolve = new_resolver(pid)
  local frames, byframe, stacks, bystack = {}, {}, {}, {}
  local function intern(f)
    local k = table.concat({ f.what, f.name or "", f.source or "", tostring(f.line),
                             tostring(f.linedefined) }, "\0")
    local id = byframe[k]
    if not id then
      id = #frames + 1
      frames[id] = { name = f.name, source = f.source, line = f.line or -1,
                     linedefined = f.linedefined or -1, what = f.what }
      byframe[k] = id
    end
    return id
  end
  local cache = {}       -- raw stack -> its native part's trimmed frames, by native ids
  local into, pos = {}, {}
  for si, s in ipairs(raw.stacks) do
    local ids, natives = {}, {}
    for _, fid in ipairs(s) do
      local f = raw.frames[fid]
      if f.what == "native" or f.what == "kernel" then natives[#natives + 1] = f
      else ids[#ids + 1] = intern(f) end
    end
    if #natives > 0 then
      local key = {}
      for i, f in ipairs(natives) do key[i] = tostring(f.ip) .. f.what end
      key = table.concat(key, ",")
      local t = cache[key]
      if not t then
        t = {}
        for i, f in ipairs(trim(natives, resolve)) do t[i] = intern(f) end
        cache[key] = t
      end
      for _, id in ipairs(t) do ids[#ids + 1] = id end
    end
    local k = table.concat(ids, ",")
    local st = bystack[k]
    if not st then
      st = {}   -- the ids first, the counts last (perfev.profile.jit's stacks: LuaJIT's forwarding)
      for i, id in ipairs(ids) do st[i] = id end
      st.weight, st.samples = 0, 0
      stacks[#stacks + 1] = st
      bystack[k] = st
      pos[st] = #stacks
    end
    into[si] = pos[st]
    st.weight, st.samples = st.weight + s.weight, st.samples + s.samples
  end
  local out = {}
  for k, v in pairs(raw) do out[k] = v end
  out.frames, out.stacks, out.into = frames, stacks, into
  return out
end

return M
