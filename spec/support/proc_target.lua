-- spec.support.proc_target: a stand-in for perfev.attach.target (the
-- engine's reader of another process) for the readers' specs: the same
-- interface (ATTACH.md), reading /proc/PID/mem with io.open + seek + read.
-- As root this works on a running process; the specs stop the target
-- (SIGSTOP) around each read so what they read is one moment.
local elf = require "perfev.elf"
local mem = require "perfev.attach.puc_mem"

local M = {}
local Target = {}
Target.__index = Target

local function parse_maps(pid)
  local f = io.open("/proc/" .. pid .. "/maps", "r")
  if not f then return nil end
  local maps = {}
  for line in f:lines() do
    local lo, hi, perms, off, path = line:match("^(%x+)%-(%x+)%s+(%S+)%s+(%x+)%s+%S+%s+%d+%s*(.*)$")
    if lo then
      maps[#maps + 1] = { lo = tonumber(lo, 16), hi = tonumber(hi, 16), perms = perms,
                          offset = tonumber(off, 16), path = path }
    end
  end
  f:close()
  return maps
end

function M.open(pid)
  local maps = parse_maps(pid)
  if not maps then return nil, "no process " .. pid end
  local f, err = io.open("/proc/" .. pid .. "/mem", "rb")
  if not f then return nil, err end
  f:setvbuf("no")
  return setmetatable({
    pid = pid, maps = maps, f = f,
    exe = io.popen("readlink /proc/" .. pid .. "/exe"):read("*l"),
    cwd = "/proc/" .. pid .. "/cwd", root = "/proc/" .. pid .. "/root",
  }, Target)
end

function Target:refresh() self.maps = parse_maps(self.pid) or self.maps end

function Target:read(addr, len)
  if type(addr) ~= "number" or addr <= 0 then return nil, "bad address" end
  if not self.f:seek("set", addr) then return nil, "seek failed" end
  local s = self.f:read(len)
  if not s or #s < len then return nil, ("cannot read %d bytes at 0x%x"):format(len, addr) end
  return s
end

function Target:ptr(addr)
  local s = self:read(addr, 8)
  return s and mem.ptr(s, 0)
end
function Target:u32(addr) local s = self:read(addr, 4); return s and mem.u32(s, 0) end
function Target:i32(addr) local s = self:read(addr, 4); return s and mem.i32(s, 0) end
function Target:u16(addr) local s = self:read(addr, 2); return s and mem.u16(s, 0) end
function Target:u8(addr) local s = self:read(addr, 1); return s and s:byte() end

function Target:cstring(addr, max)
  local s = self:read(addr, max or 256)
  if not s then return nil end
  return s:match("^[^%z]*")
end

-- an exported function's address in a mapped object (functions only: what
-- perfev.elf's symbol tables hold)
function Target:symbol(name, pattern)
  local seen = {}
  for _, m in ipairs(self.maps) do
    local p = m.path
    if p and p:sub(1, 1) == "/" and not seen[p] and (not pattern or p:find(pattern)) then
      seen[p] = true
      local e = elf.open(self.root .. p)
      local sym = e and e:find(name)
      local foff = sym and e:offset(sym[1])
      if foff then
        for _, mm in ipairs(self.maps) do
          if mm.path == p and foff >= mm.offset and foff < mm.offset + (mm.hi - mm.lo) then
            return mm.lo + foff - mm.offset
          end
        end
      end
    end
  end
  return nil
end

function Target:close() if self.f then self.f:close(); self.f = nil end end

return M
