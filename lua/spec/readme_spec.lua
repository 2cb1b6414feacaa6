-- The READMEs' Lua examples, run: each block that follows a `<!-- readme-example: NAME -->` line
-- in lua/README.md and in the root README.md runs as it is, and what it prints must be what its
-- closing `-- ` comment lines say (a line ending in "..." is a prefix).

local function read(path)
  local file = assert(io.open(path, "r"), "cannot open " .. path)
  local text = file:read("*a")
  file:close()
  return text
end

-- { name, code, expected lines } of every example in `text`.
local function examples(text)
  local found = {}
  for name, code in text:gmatch("<!%-%- readme%-example: (%S+) %-%->\n```lua\n(.-)```") do
    local expected = {}
    for line in code:gmatch("[^\n]+") do
      local printed = line:match("^%-%- (.*)$")
      if printed then
        expected[#expected + 1] = printed
      end
    end
    found[#found + 1] = { name = name, code = code, expected = expected }
  end
  return found
end

local function run(code)
  local printed = {}
  local env = setmetatable({
    print = function(...)
      local parts = {}
      for i = 1, select("#", ...) do
        parts[i] = tostring((select(i, ...)))
      end
      printed[#printed + 1] = table.concat(parts, "\t")
    end,
  }, { __index = _G })
  local chunk
  if setfenv then
    chunk = assert(loadstring(code, "=example"))
    setfenv(chunk, env)
  else
    chunk = assert(load(code, "=example", "t", env))
  end
  chunk()
  return printed
end

describe("the READMEs' examples (" .. (jit and jit.version or _VERSION) .. ")", function()
  for _, path in ipairs({ "README.md", "../README.md" }) do
    local found = examples(read(path))
    it("are found in " .. path, function()
      assert.is_true(#found > 0, "no example in " .. path)
    end)
    for _, example in ipairs(found) do
      it(path .. ": " .. example.name, function()
        local printed = run(example.code)
        assert.are.equal(#example.expected, #printed, table.concat(printed, "\n"))
        for i, expected in ipairs(example.expected) do
          local prefix = expected:match("^(.-) ?%.%.%.$")
          if prefix then
            assert.are.equal(prefix, printed[i]:sub(1, #prefix))
          else
            assert.are.equal(expected, printed[i])
          end
        end
      end)
    end
  end
end)
