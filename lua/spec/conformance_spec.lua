-- The Lua runner of the shared conformance suite (tests/conformance/README.md): one busted `it()`
-- per scenario file, each op mapped onto the module's Lua API.
--
-- AGENTBREAKER_CONFORMANCE_DIR names the suite directory (default: the repository's
-- tests/conformance, found from this file's location). JSON is read with dkjson (Debian's
-- lua-dkjson, which busted depends on): objects and arrays come back marked with a `__jsontype`
-- metatable, and `null` is decoded as `agentbreaker.null`, so the expectations keep their shape.

local ab = require("agentbreaker")
local json = require("dkjson")
local lfs = require("lfs")

local null = ab.null

local function here()
  local source = debug.getinfo(1, "S").source
  return (source:sub(1, 1) == "@" and source:sub(2) or source):match("^(.*)/[^/]*$") or "."
end

local SUITE = os.getenv("AGENTBREAKER_CONFORMANCE_DIR") or (here() .. "/../../tests/conformance")

local function readFile(path)
  local f = assert(io.open(path, "rb"))
  local text = f:read("*a")
  f:close()
  return text
end

-- Every *.json under dir, recursively, in sorted path order (schema.json is not a scenario).
local function scenarioFiles(dir, prefix, out)
  local names = {}
  for name in lfs.dir(dir) do
    if name ~= "." and name ~= ".." then
      names[#names + 1] = name
    end
  end
  table.sort(names)
  for _, name in ipairs(names) do
    local path = dir .. "/" .. name
    local rel = prefix == "" and name or (prefix .. "/" .. name)
    if lfs.attributes(path, "mode") == "directory" then
      scenarioFiles(path, rel, out)
    elseif name:match("%.json$") and rel ~= "schema.json" then
      out[#out + 1] = { path = path, name = rel:gsub("%.json$", "") }
    end
  end
  return out
end

---------------------------------------------------------------------------------------------
-- Matching (README "Matching")

local function jsonKind(t)
  local mt = getmetatable(t)
  return mt and mt.__jsontype
end

local function show(v)
  if v == null then
    return "null"
  elseif type(v) == "table" then
    local ok, text = pcall(json.encode, v, { exception = function() return "<?>" end })
    return ok and text or tostring(v)
  end
  return tostring(v)
end

local function fail(path, expected, actual)
  error(("at %s: expected %s, got %s"):format(path, show(expected), show(actual)), 0)
end

local function match(expected, actual, path)
  if expected == null then
    if actual ~= nil and actual ~= null then
      fail(path, expected, actual)
    end
  elseif type(expected) == "table" then
    if type(actual) ~= "table" then
      fail(path, expected, actual)
    end
    if jsonKind(expected) == "array" then
      if #expected ~= #actual then
        error(("at %s: expected %d elements, got %d: %s"):format(path, #expected, #actual,
          show(actual)), 0)
      end
      for i = 1, #expected do
        match(expected[i], actual[i], ("%s[%d]"):format(path, i - 1))
      end
    else
      for key, value in pairs(expected) do
        match(value, actual[key], path .. "." .. tostring(key))
      end
    end
  elseif type(expected) == "number" then
    if type(actual) ~= "number" or math.abs(expected - actual) > 1e-9 then
      fail(path, expected, actual)
    end
  elseif expected ~= actual then
    fail(path, expected, actual)
  end
end

---------------------------------------------------------------------------------------------
-- Subjects and ops

local TOP_KEYS = { description = true, subject = true, config = true, configError = true,
  spec = true, steps = true }
local STEP_KEYS = { op = true, at = true, args = true, ["repeat"] = true, expect = true,
  expectError = true }

-- A copy of a scenario config with the Lua-only options added.
local function withOptions(config, options)
  local copy = {}
  if type(config) == "table" then
    for k, v in pairs(config) do
      copy[k] = v
    end
  end
  for k, v in pairs(options) do
    copy[k] = v
  end
  return copy
end

local function build(subject, config, clock, listener)
  local options = { clock = clock, listeners = { listener } }
  if subject == "failure" then
    options.quiet = true -- the seed's print/warn lines are checked by seed004_replay_spec
    return ab.CircuitBreaker.new(withOptions(config, options))
  elseif subject == "stagnation" then
    return ab.StagnationBreaker.new(withOptions(config, options))
  elseif subject == "budget" then
    return ab.BudgetBreaker.new(withOptions(config, options))
  elseif subject == "strategy" then
    return ab.ExitStrategy.new(withOptions(config, options))
  elseif subject == "fixPlan" then
    return ab.FixPlan.new(withOptions(config, options))
  elseif subject == "loop" then
    return ab.Loop.new(withOptions(config, options))
  elseif subject == "monitor" then
    return ab.Monitor.new(withOptions(config, options))
  elseif subject == "analyzer" or subject == "env" then
    if config ~= nil and (type(config) ~= "table" or next(config) ~= nil) then
      error(subject .. " takes no config", 0)
    end
    return {}
  end
  error(("unknown subject %q"):format(tostring(subject)), 0)
end

-- ops[subject][op] = { args = {allowed arg names} or true (passed whole), run = function }
local ops = {}

ops.failure = {
  recordSuccess = { args = {}, run = function(o) o:recordSuccess() end },
  recordFailure = { args = { "error" }, run = function(o, a) o:recordFailure(a.error) end },
  shouldAllowOperation = { args = {}, run = function(o)
    local allowed, message = o:shouldAllowOperation()
    return { allowed = allowed, message = message }
  end },
  getStatus = { args = {}, run = function(o) return o:getStatus() end },
  metrics = { args = {}, run = function(o) return o:metrics() end },
  reset = { args = {}, run = function(o) o:reset() end },
  snapshot = { args = {}, run = function(o) return o:snapshot() end },
  restore = { args = { "snapshot" }, run = function(o, a) o:restore(a.snapshot) end },
  call = { args = { "error" }, run = function(o, a)
    local ran = false
    local ok, err = o:pcall(function()
      ran = true
      if a.error ~= nil then
        error(a.error, 0)
      end
    end)
    if ok then
      return { called = true, ok = true }
    elseif ran then
      return { called = true, ok = false }
    end
    error(err, 0) -- refused, and the function did not run
  end },
  save = { args = { "path" }, run = function(o, a) o:save(a.path) end },
  load = { args = { "path" }, run = function(o, a) return { loaded = o:load(a.path) } end },
}

ops.stagnation = {
  recordProgress = { args = true, run = function(o, a) o:recordProgress(a) end },
  recordStep = { args = true, run = function(o, a) o:recordStep(a) end },
  recordError = { args = { "error", "transient" }, run = function(o, a)
    local options = nil
    if a.transient ~= nil then
      options = { transient = a.transient }
    end
    o:recordError(a.error, options)
  end },
  check = { args = {}, run = function(o) return o:check() end },
  getStatus = { args = {}, run = function(o) return o:getStatus() end },
  reset = { args = {}, run = function(o) o:reset() end },
  snapshot = { args = {}, run = function(o) return o:snapshot() end },
  restore = { args = { "snapshot" }, run = function(o, a) o:restore(a.snapshot) end },
}

ops.budget = {
  ingest = { args = { "event" }, run = function(o, a) return { halt = o:ingest(a.event) } end },
  tick = { args = {}, run = function(o) return { halts = o:tick() } end },
  snapshot = { args = {}, run = function(o) return o:snapshot() end },
  reset = { args = {}, run = function(o) o:reset() end },
}

ops.analyzer = {
  analyze = { args = { "text" }, run = function(_, a) return ab.analyze(a.text) end },
}

local function shouldExit(o, a)
  local text = a.text
  if text == nil then
    text = ""
  end
  return o:shouldExit(text, a.circuitState)
end

ops.strategy = {
  shouldExit = { args = { "text", "circuitState" }, run = shouldExit },
  reset = { args = {}, run = function(o) o:reset() end },
}

ops.fixPlan = {
  shouldExit = { args = { "text", "circuitState" }, run = shouldExit },
  getStatus = { args = {}, run = function(o) return o:getStatus() end },
  reset = { args = {}, run = function(o) o:reset() end },
}

ops.loop = {
  observe = { args = true, run = function(o, a) return o:observe(a) end },
  getStatus = { args = {}, run = function(o) return o:getStatus() end },
  reset = { args = {}, run = function(o) o:reset() end },
}

ops.monitor = {
  observe = { args = { "event" }, run = function(o, a) return o:observe(a.event) end },
  tick = { args = {}, run = function(o) return { verdicts = o:tick() } end },
  status = { args = {}, run = function(o) return o:status() end },
  snapshot = { args = {}, run = function(o) return o:snapshot() end },
  restore = { args = { "snapshot" }, run = function(o, a) o:restore(a.snapshot) end },
  reset = { args = {}, run = function(o) o:reset() end },
}

ops.env = {
  configFromEnv = { args = { "env" }, run = function(_, a)
    if type(a.env) ~= "table" then
      error("env must be an object", 0)
    end
    return ab.configFromEnv(a.env)
  end },
}

---------------------------------------------------------------------------------------------
-- Running a scenario

-- `$TMP/...` strings become paths in the scenario's temporary directory.
local function substituteTmp(value, tmp)
  if type(value) == "string" then
    local rest = value:match("^%$TMP/(.*)$")
    return rest and (tmp .. "/" .. rest) or value
  elseif type(value) == "table" and value ~= null then
    local copy = setmetatable({}, getmetatable(value))
    for k, v in pairs(value) do
      copy[k] = substituteTmp(v, tmp)
    end
    return copy
  end
  return value
end

local function makeTmpDir()
  local path = os.tmpname()
  os.remove(path)
  assert(lfs.mkdir(path))
  return path
end

local function removeTmpDir(path)
  for name in lfs.dir(path) do
    if name ~= "." and name ~= ".." then
      os.remove(path .. "/" .. name)
    end
  end
  lfs.rmdir(path)
end

-- The code of an error raised by the API ("INVALID_ARGUMENT: ..."), or nil.
local function codeOf(err)
  return type(err) == "string" and err:match("^([A-Z][A-Z_]*): ") or nil
end

local function checkKeys(t, allowed, what)
  for key in pairs(t) do
    if not allowed[key] then
      error(("unknown %s %q"):format(what, tostring(key)), 0)
    end
  end
end

-- `args.snapshot == "$last_snapshot"` (README "Snapshots within a scenario"): the latest snapshot
-- step's result, passed through JSON text as a hook that keeps it in a file would.
local function substituteSnapshot(args, scenario)
  if args.snapshot ~= "$last_snapshot" then
    return args
  end
  if scenario.lastSnapshot == nil then
    error("$last_snapshot before any snapshot step", 0)
  end
  local copy = {}
  for k, v in pairs(args) do
    copy[k] = v
  end
  copy.snapshot = json.decode(json.encode(scenario.lastSnapshot), 1, null)
  return copy
end

local function runStep(subjectName, object, step, clock, events, tmp, scenario)
  checkKeys(step, STEP_KEYS, "step key")
  local opName = step.op
  local args = substituteSnapshot(substituteTmp(step.args or {}, tmp), scenario)
  local op
  if opName == "events" then
    op = { args = {}, run = function()
      local drained = {}
      for i, e in ipairs(events) do
        drained[i] = e
        events[i] = nil
      end
      return { events = drained }
    end }
  else
    op = ops[subjectName][opName]
  end
  if not op then
    error(("unknown op %q for subject %s"):format(tostring(opName), subjectName), 0)
  end
  if op.args ~= true then
    local allowed = {}
    for _, name in ipairs(op.args) do
      allowed[name] = true
    end
    checkKeys(args, allowed, "arg")
  end
  if step.at ~= nil then
    clock:set(step.at)
  end
  local expectError = step.expectError
  local last
  for _ = 1, step["repeat"] or 1 do
    local ok, result = pcall(op.run, object, args)
    if expectError ~= nil then
      if ok then
        error(("expected %s, got result %s"):format(expectError, show(result)), 0)
      elseif codeOf(result) ~= expectError then
        error(("expected %s, got error %s"):format(expectError, tostring(result)), 0)
      end
    elseif not ok then
      error("unexpected error " .. tostring(result), 0)
    end
    last = result
  end
  if opName == "snapshot" and expectError == nil then
    scenario.lastSnapshot = last
  end
  if expectError == nil and step.expect ~= nil then
    match(step.expect, last, "$")
  end
end

local function runScenario(path)
  local scenario, _, err = json.decode(readFile(path), 1, null)
  if type(scenario) ~= "table" then
    error("bad JSON: " .. tostring(err), 0)
  end
  checkKeys(scenario, TOP_KEYS, "top-level key")
  local subjectName = scenario.subject
  if not ops[subjectName] then
    error(("unknown subject %q"):format(tostring(subjectName)), 0)
  end
  local tmp = makeTmpDir()
  local state = {} -- what the steps share: the latest snapshot
  local ok, problem = pcall(function()
    local clock = ab.ManualClock.new(0)
    local events = {}
    local config = scenario.config
    if config == null then
      config = nil
    end
    config = substituteTmp(config, tmp)
    local built, object = pcall(build, subjectName, config, clock, function(e)
      events[#events + 1] = e
    end)
    if scenario.configError ~= nil then
      if built then
        error("construction succeeded, expected " .. scenario.configError, 0)
      elseif codeOf(object) ~= scenario.configError then
        error(("construction failed with %s, expected %s"):format(tostring(object),
          scenario.configError), 0)
      end
      return
    end
    if not built then
      error("construction failed: " .. tostring(object), 0)
    end
    for i, step in ipairs(scenario.steps) do
      local stepOk, stepErr = pcall(runStep, subjectName, object, step, clock, events, tmp, state)
      if not stepOk then
        error(("step %d (%s): %s"):format(i - 1, tostring(step.op), tostring(stepErr)), 0)
      end
    end
  end)
  removeTmpDir(tmp)
  if not ok then
    error(problem, 0)
  end
end

local files = scenarioFiles(SUITE, "", {})

describe("conformance suite (" .. (jit and jit.version or _VERSION) .. ")", function()
  it("finds the scenarios", function()
    assert.is_true(#files > 0, "no scenarios under " .. SUITE)
  end)
  for _, file in ipairs(files) do
    it(file.name, function()
      runScenario(file.path)
    end)
  end
end)
