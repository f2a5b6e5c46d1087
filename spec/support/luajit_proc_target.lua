-- A stand-in for perfev.attach's target object (ATTACH interface) for the
-- LuaJIT reader's spec until the engine lands: reads another process's
-- memory through /proc/PID/mem (as root this works on a running process;
-- the spec reads it while the thread is stopped with ptrace).
local M = {}

local T = {}
T.__index = T

local function maps_of(pid)
  local maps = {}
  for line in io.lines("/proc/" .. pid .. "/maps") do
    local lo, hi, perms, off, path = line:match("^(%x+)%-(%x+) (%S+) (%x+) %S+ %S+%s*(.*)$")
    if lo then
      maps[#maps + 1] = { lo = tonumber(lo, 16), hi = tonumber(hi, 16), perms = perms,
                          offset = tonumber(off, 16), path = path ~= "" and path or nil }
    end
  end
  return maps
end

function M.open(pid)
  local mem, err = io.open("/proc/" .. pid .. "/mem", "rb")
  if not mem then return nil, err end
  mem:setvbuf("no")   -- stdio would serve a seek inside its buffer from the old bytes
  local function link(name)
    local p = io.popen("readlink /proc/" .. pid .. "/" .. name)
    local s = p:read("*l")
    p:close()
    return s
  end
  return setmetatable({ pid = pid, mem = mem, maps = maps_of(pid), exe = link("exe"),
                        cwd = link("cwd"), root = link("root") }, T)
end

function T:refresh() self.maps = maps_of(self.pid) end

function T:read(addr, len)
  if addr < 0 or addr >= 2 ^ 47 then return nil, "address out of range" end
  local ok = self.mem:seek("set", addr)
  if not ok then return nil, "seek" end
  local s = self.mem:read(len)
  if not s or #s < len then return nil, "short read" end
  return s
end

local function le(s)
  local v = 0
  for i = #s, 1, -1 do v = v * 256 + s:byte(i) end
  return v
end

function T:ptr(addr)
  local s = self:read(addr, 8)
  if not s then return nil end
  if s:byte(7) ~= 0 or s:byte(8) ~= 0 then return nil end   -- not a user address
  return le(s)
end
function T:u32(addr) local s = self:read(addr, 4) return s and le(s) end
function T:i32(addr)
  local v = self:u32(addr)
  if v and v >= 2147483648 then v = v - 4294967296 end
  return v
end
function T:u16(addr) local s = self:read(addr, 2) return s and le(s) end
function T:u8(addr) local s = self:read(addr, 1) return s and s:byte() end
function T:u64parts(addr)
  local s = self:read(addr, 8)
  if not s then return nil end
  return le(s:sub(1, 4)), le(s:sub(5, 8))
end
function T:cstring(addr, max)
  local s = self:read(addr, max or 256)
  return s and s:match("^[^%z]*")
end
function T.symbol() return nil end
function T:close() self.mem:close() end

return M
