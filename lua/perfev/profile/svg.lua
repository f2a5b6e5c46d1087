-- A self-contained interactive SVG flame graph: one rectangle per function
-- in a stack, as wide as its share of the event, the root at the bottom.
-- In a browser: hover for a tooltip (name, weight, share), click a frame
-- to zoom into it, "Reset zoom" (or Escape) to come back, "Search" (or
-- Ctrl-F) for a Lua pattern-like regular expression: matching frames turn
-- purple and the share they cover is shown. No external file or script.
local folded = require "perfev.profile.folded"

local M = {}

M.WIDTH = 1200        -- px
M.ROW = 16            -- px per frame
M.PAD = 10            -- px left and right
M.TOP = 40            -- px above the frames (title, buttons)
M.BOTTOM = 24         -- px below (details line)
M.MIN_WIDTH = 0.1     -- px: narrower frames are left out (they would not show)

local function esc(s)
  return (s:gsub("[&<>\"']", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;",
                               ['"'] = "&quot;", ["'"] = "&#39;" }))
end

-- The tree of functions: { label, weight, kids = { ... }, order = { ... } }.
local function tree(p)
  local root = { label = "all", weight = 0, kids = {}, order = {} }
  for _, t in ipairs(folded.fold(p)) do
    root.weight = root.weight + t.weight
    local n = root
    for _, l in ipairs(t.labels) do
      local k = n.kids[l]
      if not k then
        k = { label = l, weight = 0, kids = {}, order = {} }
        n.kids[l] = k
        n.order[#n.order + 1] = k
      end
      k.weight = k.weight + t.weight
      n = k
    end
  end
  return root
end

local function depth_of(n)
  local d = 0
  for _, k in ipairs(n.order) do d = math.max(d, depth_of(k)) end
  return d + 1
end

-- A stable colour from the name: Lua functions warm, C functions (Lua's
-- "name [C]" and --native's "name [libc.so.6]") cool, the kernel's
-- ("name [kernel]") green.
local function colour(label)
  local h = 0
  for i = 1, #label do h = (h * 31 + label:byte(i)) % 1000003 end
  local v1, v2 = h % 97 / 97, h % 89 / 89
  if label:find(" %[kernel%]$") then
    return ("rgb(%d,%d,%d)"):format(60 + math.floor(50 * v1), 170 + math.floor(60 * v2), 80)
  end
  if label:find(" %[[^%]]+%]$") then
    return ("rgb(%d,%d,%d)"):format(80 + math.floor(60 * v1), 170 + math.floor(50 * v2), 200)
  end
  -- (green stays under red: 80 + 150 * v2 made some Lua frames
  -- yellow-green, like the kernel's, for some names)
  return ("rgb(%d,%d,%d)"):format(205 + math.floor(50 * v1), 70 + math.floor(130 * v2),
                                  math.floor(55 * v1))
end

local function fmt_weight(w, unit)
  if unit == "nanoseconds" then
    if w >= 1e9 then return ("%.2f s"):format(w / 1e9) end
    if w >= 1e6 then return ("%.2f ms"):format(w / 1e6) end
    return ("%.0f us"):format(w / 1e3)
  end
  if unit == "bytes" then       -- perfev.alloc's space
    if w >= 1e6 then return ("%.2f MB"):format(w / 1e6) end
    if w >= 1e3 then return ("%.1f kB"):format(w / 1e3) end
    return ("%.0f bytes"):format(w)
  end
  if unit == "count" then return ("%.0f objects"):format(w) end   -- perfev.alloc's objects
  return ("%.0f events"):format(w)
end

-- Frames as <g> elements: data-x and data-w are fractions of the whole.
local function frames(p, root, height, out)
  local total = root.weight
  local span = M.WIDTH - 2 * M.PAD
  local function emit(n, x, depth)
    local w = total > 0 and n.weight / total or 0
    if w * span < M.MIN_WIDTH then return end
    local y = height - M.BOTTOM - (depth + 1) * M.ROW
    local tip = ("%s (%s, %.2f%%)"):format(n.label, fmt_weight(n.weight, p.unit), 100 * w)
    out[#out + 1] = ('<g class="f" data-x="%.8f" data-w="%.8f" data-d="%d"><title>%s</title>'
                     .. '<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s" rx="2"/>'
                     .. '<text x="%.2f" y="%d">%s</text></g>')
      :format(x, w, depth, esc(tip), M.PAD + x * span, y, w * span, M.ROW - 1,
              depth == 0 and "rgb(200,200,200)" or colour(n.label),
              M.PAD + x * span + 3, y + M.ROW - 4, esc(n.label))
    local cx = x
    for _, k in ipairs(n.order) do
      emit(k, cx, depth + 1)
      cx = cx + (total > 0 and k.weight / total or 0)
    end
  end
  emit(root, 0, 0)
end

local SCRIPT = [[
(function () {
  var svg = document.documentElement, W = %d, PAD = %d;
  var frames = Array.prototype.slice.call(document.querySelectorAll("g.f"));
  var details = document.getElementById("details"), matched = document.getElementById("matched");
  var zoomed = null;
  function fit(g, x, w) {
    var r = g.querySelector("rect"), t = g.querySelector("text");
    var px = w * (W - 2 * PAD);
    r.setAttribute("x", PAD + x * (W - 2 * PAD)); r.setAttribute("width", Math.max(px, 0));
    t.setAttribute("x", PAD + x * (W - 2 * PAD) + 3);
    var full = g.querySelector("title").textContent.replace(/ \([^()]*, [0-9.]+%%\)$/, "");
    var room = Math.floor((px - 6) / 7);
    t.textContent = room < 3 ? "" : (full.length <= room ? full : full.slice(0, room - 2) + "..");
  }
  function zoom(g) {
    var x0 = +g.dataset.x, w0 = +g.dataset.w, d0 = +g.dataset.d;
    zoomed = g;
    frames.forEach(function (f) {
      var x = +f.dataset.x, w = +f.dataset.w, d = +f.dataset.d;
      var inside = x >= x0 - 1e-12 && x + w <= x0 + w0 + 1e-9;
      var below = d < d0 && x <= x0 + 1e-12 && x + w >= x0 + w0 - 1e-9;
      if (inside && d >= d0) { f.style.display = ""; f.style.opacity = 1; fit(f, (x - x0) / w0, w / w0); }
      else if (below) { f.style.display = ""; f.style.opacity = 0.5; fit(f, 0, 1); }
      else f.style.display = "none";
    });
    document.getElementById("unzoom").style.opacity = 1;
  }
  function reset() {
    zoomed = null;
    frames.forEach(function (f) { f.style.display = ""; f.style.opacity = 1; fit(f, +f.dataset.x, +f.dataset.w); });
    document.getElementById("unzoom").style.opacity = 0.2;
  }
  function search(re) {
    var spans = [];
    frames.forEach(function (f) {
      var r = f.querySelector("rect");
      if (!f.dataset.fill) f.dataset.fill = r.getAttribute("fill");
      var name = f.querySelector("title").textContent;
      if (re && re.test(name)) { r.setAttribute("fill", "rgb(190,80,230)"); spans.push([+f.dataset.x, +f.dataset.w]); }
      else r.setAttribute("fill", f.dataset.fill);
    });
    spans.sort(function (a, b) { return a[0] - b[0] || b[1] - a[1]; });
    var covered = 0, end = -1;   /* a match inside another counts once */
    spans.forEach(function (s) { if (s[0] >= end - 1e-12) { covered += s[1]; end = s[0] + s[1]; } });
    matched.textContent = re ? "Matched: " + (100 * covered).toFixed(2) + "%%" : "";
  }
  function ask() {
    var s = prompt("Search (regular expression)", "");
    if (s === null) return;
    try { search(s ? new RegExp(s) : null); } catch (e) { matched.textContent = "bad expression: " + e.message; }
  }
  frames.forEach(function (f) {
    f.addEventListener("click", function () { zoom(f); });
    f.addEventListener("mouseover", function () { details.textContent = f.querySelector("title").textContent; });
    f.addEventListener("mouseout", function () { details.textContent = " "; });
  });
  document.getElementById("unzoom").addEventListener("click", reset);
  document.getElementById("search").addEventListener("click", ask);
  window.addEventListener("keydown", function (e) {
    if (e.key === "Escape") { reset(); search(null); }
    if ((e.ctrlKey || e.metaKey) && e.key === "f") { e.preventDefault(); ask(); }
  });
  /* for tests and scripts: flamegraph.zoom(i), .reset(), .search(re) */
  window.flamegraph = { zoom: function (i) { zoom(frames[i]); }, reset: reset, frames: frames,
                        search: function (s) { search(s ? new RegExp(s) : null); } };
  reset();
})();
]]

function M.encode(p)
  local root = tree(p)
  local height = M.TOP + M.BOTTOM + depth_of(root) * M.ROW
  local native = false
  for _, f in ipairs(p.frames or {}) do native = native or f.what == "native" or f.what == "kernel" end
  local title = p.name or ("Lua %sfunctions on %s"):format(native and "and native " or "", p.event)
  local out = {
    '<?xml version="1.0" standalone="no"?>',
    ('<svg version="1.1" width="%d" height="%d" viewBox="0 0 %d %d" '
     .. 'xmlns="http://www.w3.org/2000/svg">'):format(M.WIDTH, height, M.WIDTH, height),
    '<style>text { font-family: monospace; font-size: 12px; fill: rgb(0,0,0); } '
     .. 'g.f:hover rect { stroke: black; stroke-width: 0.5; } g.f { cursor: pointer; } '
     .. '.btn { cursor: pointer; fill: rgb(0,0,160); } #title { font-size: 17px; }</style>',
    ('<rect x="0" y="0" width="%d" height="%d" fill="rgb(250,250,245)"/>'):format(M.WIDTH, height),
    ('<text id="title" x="%d" y="24" text-anchor="middle">%s</text>'):format(M.WIDTH / 2, esc(title)),
    ('<text id="unzoom" class="btn" x="%d" y="24" style="opacity:0.2">Reset zoom</text>'):format(M.PAD),
    ('<text id="search" class="btn" x="%d" y="24" text-anchor="end">Search</text>'):format(M.WIDTH - M.PAD),
    ('<text id="matched" x="%d" y="%d" text-anchor="end"> </text>')
      :format(M.WIDTH - M.PAD, height - 8),
    ('<text id="details" x="%d" y="%d"> </text>'):format(M.PAD, height - 8),
  }
  frames(p, root, height, out)
  out[#out + 1] = "<script><![CDATA["
  out[#out + 1] = SCRIPT:format(M.WIDTH, M.PAD)
  out[#out + 1] = "]]></script>"
  out[#out + 1] = "</svg>"
  return table.concat(out, "\n") .. "\n"
end

return M
