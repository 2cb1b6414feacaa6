-- The bad-input matrix of the Lua module: every public entry point (constructors, methods,
-- functions, config and option fields, the fields of the tables methods take) against every kind
-- of bad value, each cell one test.
--
-- The expectations are the table in docs/bad-input/lua.md: this spec reads it, so the document
-- and the test cannot drift apart. Each row there names an entry point; ENTRIES below says how
-- to call it with a value (the value goes where the row's name puts it: the argument, the field,
-- or `self` for a method without arguments). A cell is a code (`INVALID_CONFIG ...`: the call
-- must raise an error string beginning with that code) or `accepted ...` (the call must return).
-- Whatever the outcome, the interpreter must survive, and the object the call was made on (or
-- made by, for an accepted constructor) must still work afterwards.
--
-- Run directly (not under busted) it prints the table as the module behaves now:
--   cd lua && LUA_CPATH="../target/lua/5.4/?.so;;" lua5.4 spec/bad_input_spec.lua

local ab = require("agentbreaker")

local DOC = "../docs/bad-input/lua.md"
local MB10 = string.rep("x", 10 * 1024 * 1024) -- built once

-- The columns, in the document's order: header text and the value tried.
local COLUMNS = {
  { name = "wrong type", wrong = true },
  { name = "nil", value = nil },
  { name = "NaN", value = 0 / 0 },
  { name = "+inf", value = math.huge },
  { name = "-inf", value = -math.huge },
  { name = "negative (-1)", value = -1 },
  { name = "zero", value = 0 },
  { name = "2^64", value = 2 ^ 64 },
  { name = "1e300", value = 1e300 },
  { name = "10 MB string", value = MB10 },
}

---------------------------------------------------------------------------------------------
-- Objects, and how to tell that one still works

local function quiet(config)
  config = config or {}
  config.quiet = true
  return config
end

local MAKE = {
  cb = function()
    return ab.CircuitBreaker.new(quiet())
  end,
  sb = function()
    return ab.StagnationBreaker.new()
  end,
  bb = function()
    return ab.BudgetBreaker.new()
  end,
  strategy = function()
    return ab.ExitStrategy.new({ type = "auto" })
  end,
  plan = function()
    return ab.FixPlan.fromMarkdown("- [ ] first\n- [ ] second")
  end,
  loop = function()
    return ab.Loop.new()
  end,
  monitor = function()
    return ab.Monitor.new()
  end,
  clock = function()
    return ab.ManualClock.new(0)
  end,
}

local WORKS = {
  CircuitBreaker = function(o)
    local before = o.consecutiveFailures
    o:recordFailure("still works")
    assert(o.consecutiveFailures == before + 1, "recordFailure no longer counts")
    assert(type(o:getStatus().state) == "string")
  end,
  StagnationBreaker = function(o)
    o:recordProgress({ filesChanged = 1, outputLength = 10 })
    assert(type(o:check().state) == "string")
  end,
  BudgetBreaker = function(o)
    o:ingest({ type = "tool_use", name = "Read", taskId = "still-works" })
    local found = false
    for _, task in ipairs(o:snapshot().tasks) do
      found = found or task.taskId == "still-works"
    end
    assert(found, "ingest no longer opens tasks")
  end,
  ExitStrategy = function(o)
    assert(type(o:shouldExit("Working on it.").exit) == "boolean")
  end,
  Loop = function(o)
    o:reset()
    assert(o:observe({ output = "Working on it." }).iteration == 1)
  end,
  Monitor = function(o)
    o:observe({ type = "tool_use", name = "Read", taskId = "still-works" })
    local found = false
    for _, task in ipairs(o:status().tasks) do
      found = found or (task.taskId == "still-works" and task.toolCalls >= 1)
    end
    assert(found, "observe no longer counts tool calls")
  end,
  Clock = function(o)
    if tostring(o):find("ManualClock", 1, true) then
      o:set(1234)
      assert(o:now() == 1234)
    else
      assert(o:now() > 0)
    end
  end,
}

-- The class of an object from its tostring ("agentbreaker.CircuitBreaker(...)").
local function classOf(o)
  local name = tostring(o):match("^agentbreaker%.(%w+)")
  if name == "ManualClock" or name == "SystemClock" then
    return "Clock"
  end
  return name
end

local function works(o)
  local check = WORKS[classOf(o)]
  assert(check, "no check for " .. tostring(o))
  check(o)
end

---------------------------------------------------------------------------------------------
-- The entry points: how to call each with a value, and what "wrong type" is for it

-- A valid snapshot of each breaker with one field replaced.
local function failureSnapshot(key, v)
  local s = { version = 1, kind = "failure", state = "CLOSED", consecutiveFailures = 0, backoffLevel = 0,
    trips = 0, failureHistory = {} }
  s[key] = v
  return s
end

-- An entry that sets one config key (see CONSTRUCTORS below).
local function field(options)
  options = options or {}
  options.field = true
  return options
end

local ENTRIES = {
  -- Module functions and clocks
  ["agentbreaker.analyze(text)"] = { call = function(v) ab.analyze(v) end },
  ["agentbreaker.fingerprint(text)"] = { call = function(v) ab.fingerprint(v) end },
  ["agentbreaker.fingerprint(\"x\", mode)"] = { call = function(v) ab.fingerprint("x", v) end },
  ["agentbreaker.configFromEnv(env)"] = { call = function(v) ab.configFromEnv(v) end },
  ["agentbreaker.configFromEnv{AGENTBREAKER_TOOL_CAP = v}"] = {
    call = function(v) ab.configFromEnv({ AGENTBREAKER_TOOL_CAP = v }) end },
  ["ManualClock.new(startMs)"] = { call = function(v) return ab.ManualClock.new(v) end },
  ["SystemClock.new(...)"] = { call = function(v) return ab.SystemClock.new(v) end },
  ["clock:set(ms)"] = { make = "clock", call = function(o, v) o:set(v) end },
  ["clock:advance(ms)"] = { make = "clock", call = function(o, v) o:advance(v) end },
  ["clock.now(self)"] = { make = "clock", call = function(o, v) return o.now(v) end },

  -- CircuitBreaker
  ["CircuitBreaker.new(config)"] = { call = function(v) return ab.CircuitBreaker.new(v) end },
  ["CircuitBreaker.new{failureThreshold = v}"] = field(),
  ["CircuitBreaker.new{warningThreshold = v}"] = field(),
  ["CircuitBreaker.new{cooldownMs = v}"] = field(),
  ["CircuitBreaker.new{backoffMultiplier = v}"] = field(),
  ["CircuitBreaker.new{maxCooldownMs = v}"] = field(),
  ["CircuitBreaker.new{identicalErrorThreshold = v}"] = field(),
  ["CircuitBreaker.new{errorMatch = v}"] = field(),
  ["CircuitBreaker.new{historyLimit = v}"] = field(),
  ["CircuitBreaker.new{halfOpenMaxProbes = v}"] = field(),
  ["CircuitBreaker.new{probeTimeoutMs = v}"] = field(),
  ["CircuitBreaker.new{statePath = v}"] = field(),
  ["CircuitBreaker.new{clock = v}"] = field(),
  ["CircuitBreaker.new{listeners = v}"] = field(),
  ["CircuitBreaker.new{listeners = {v}}"] = field(),
  ["CircuitBreaker.new{quiet = v}"] = field({ wrong = "yes" }),
  ["CircuitBreaker.new{log = v}"] = field(),
  ["cb.recordSuccess(self)"] = { make = "cb", call = function(o, v) o.recordSuccess(v) end },
  ["cb:recordFailure(error)"] = { make = "cb", call = function(o, v) o:recordFailure(v) end },
  ["cb.shouldAllowOperation(self)"] = { make = "cb", call = function(o, v) o.shouldAllowOperation(v) end },
  ["cb.getStatus(self)"] = { make = "cb", call = function(o, v) o.getStatus(v) end },
  ["cb.metrics(self)"] = { make = "cb", call = function(o, v) o.metrics(v) end },
  ["cb.reset(self)"] = { make = "cb", call = function(o, v) o.reset(v) end },
  ["cb.snapshot(self)"] = { make = "cb", call = function(o, v) o.snapshot(v) end },
  ["cb:restore(snapshot)"] = { make = "cb", call = function(o, v) o:restore(v) end },
  ["cb:restore{version = v, ...}"] = {
    make = "cb",
    call = function(o, v)
      o:restore(failureSnapshot("version", v))
    end,
  },
  ["cb:restore{consecutiveFailures = v, ...}"] = { make = "cb",
    call = function(o, v) o:restore(failureSnapshot("consecutiveFailures", v)) end },
  ["cb:restore{openedAt = v, ...}"] = {
    make = "cb",
    call = function(o, v)
      o:restore(failureSnapshot("openedAt", v))
    end,
  },
  ["cb:save(path)"] = { make = "cb", call = function(o, v) o:save(v) end },
  ["cb:load(path)"] = { make = "cb", call = function(o, v) o:load(v) end },
  ["cb:call(fn)"] = { make = "cb", call = function(o, v) o:call(v) end },
  ["cb:pcall(fn)"] = { make = "cb", call = function(o, v)
    local ok, err = o:pcall(v)
    if not ok then
      error(err, 0)
    end
  end },
  ["cb.threshold = value"] = { make = "cb", call = function(o, v) o.threshold = v end },
  ["cb:addListener(fn)"] = { make = "cb", call = function(o, v) o:addListener(v) end },
  ["cb:removeListener(id)"] = { make = "cb", call = function(o, v) o:removeListener(v) end },
  ["cb.listenerErrors(self)"] = { make = "cb", call = function(o, v) o.listenerErrors(v) end },

  -- StagnationBreaker
  ["StagnationBreaker.new(config)"] = { call = function(v) return ab.StagnationBreaker.new(v) end },
  ["StagnationBreaker.new{noProgressThreshold = v}"] = field(),
  ["StagnationBreaker.new{sameErrorThreshold = v}"] = field(),
  ["StagnationBreaker.new{outputDeclineThreshold = v}"] = field(),
  ["StagnationBreaker.new{errorMatch = v}"] = field(),
  ["StagnationBreaker.new{repeatThreshold = v}"] = field(),
  ["StagnationBreaker.new{cycleRepeats = v}"] = field(),
  ["StagnationBreaker.new{maxCycleLength = v}"] = field(),
  ["StagnationBreaker.new{failStreakThreshold = v}"] = field(),
  ["StagnationBreaker.new{failStreakDistinct = v}"] = field(),
  ["StagnationBreaker.new{failWindow = v}"] = field(),
  ["StagnationBreaker.new{failWindowPercent = v}"] = field(),
  ["sb:recordProgress(metrics)"] = { make = "sb", call = function(o, v) o:recordProgress(v) end },
  ["sb:recordProgress{filesChanged = v}"] = {
    make = "sb",
    call = function(o, v)
      o:recordProgress({ filesChanged = v })
    end,
  },
  ["sb:recordProgress{testsPassing = v}"] = {
    make = "sb",
    call = function(o, v)
      o:recordProgress({ testsPassing = v })
    end,
  },
  ["sb:recordProgress{outputLength = v}"] = {
    make = "sb",
    call = function(o, v)
      o:recordProgress({ outputLength = v })
    end,
  },
  ["sb:recordError(error)"] = { make = "sb", call = function(o, v) o:recordError(v) end },
  ["sb:recordError(\"x\", options)"] = { make = "sb", call = function(o, v) o:recordError("x", v) end },
  ["sb:recordError(\"x\", {transient = v})"] = { make = "sb", wrong = "yes",
    call = function(o, v) o:recordError("x", { transient = v }) end },
  ["sb:recordStep(step)"] = { make = "sb", call = function(o, v) o:recordStep(v) end },
  ["sb:recordStep{action = v}"] = { make = "sb", call = function(o, v) o:recordStep({ action = v }) end },
  ["sb:recordStep{action = \"x\", result = v}"] = {
    make = "sb",
    call = function(o, v)
      o:recordStep({ action = "x", result = v })
    end,
  },
  ["sb:recordStep{action = \"x\", failed = v}"] = {
    make = "sb", wrong = "yes",
    call = function(o, v)
      o:recordStep({ action = "x", failed = v })
    end,
  },
  ["sb.check(self)"] = { make = "sb", call = function(o, v) o.check(v) end },
  ["sb.getStatus(self)"] = { make = "sb", call = function(o, v) o.getStatus(v) end },
  ["sb.reset(self)"] = { make = "sb", call = function(o, v) o.reset(v) end },
  ["sb.snapshot(self)"] = { make = "sb", call = function(o, v) o.snapshot(v) end },
  ["sb:restore(snapshot)"] = { make = "sb", call = function(o, v) o:restore(v) end },
  ["sb:addListener(fn)"] = { make = "sb", call = function(o, v) o:addListener(v) end },
  ["sb:removeListener(id)"] = { make = "sb", call = function(o, v) o:removeListener(v) end },
  ["sb.listenerErrors(self)"] = { make = "sb", call = function(o, v) o.listenerErrors(v) end },

  -- BudgetBreaker
  ["BudgetBreaker.new(config)"] = { call = function(v) return ab.BudgetBreaker.new(v) end },
  ["BudgetBreaker.new{maxToolCallsPerTask = v}"] = field(),
  ["BudgetBreaker.new{maxTokenSpendCentsPerTask = v}"] = field(),
  ["BudgetBreaker.new{maxTaskDurationSecs = v}"] = field(),
  ["BudgetBreaker.new{maxIdleSecs = v}"] = field(),
  ["BudgetBreaker.new{similarityJaccardThreshold = v}"] = field(),
  ["BudgetBreaker.new{loopWindow = v}"] = field(),
  ["BudgetBreaker.new{maxTokensPerOutput = v}"] = field(),
  ["BudgetBreaker.new{prices = v}"] = field(),
  ["BudgetBreaker.new{prices = {[\"*\"] = {input = v, ...}}}"] = { call = function(v)
    return ab.BudgetBreaker.new({ prices = { ["*"] = { input = v, output = 1, cacheWrite = 1, cacheRead = 1 } } })
  end },
  ["bb:ingest(event)"] = { make = "bb", call = function(o, v) return o:ingest(v) end },
  ["bb:ingest{type = v, name = \"Read\"}"] = {
    make = "bb",
    call = function(o, v)
      return o:ingest({ type = v, name = "Read" })
    end,
  },
  ["bb:ingest{type = \"tool_use\", name = \"Read\", taskId = v}"] = {
    make = "bb",
    call = function(o, v)
      return o:ingest({ type = "tool_use", name = "Read", taskId = v })
    end,
  },
  ["bb:ingest{type = \"tool_use\", name = v}"] = {
    make = "bb",
    call = function(o, v)
      return o:ingest({ type = "tool_use", name = v })
    end,
  },
  ["bb:ingest{type = \"tool_use\", name = \"Read\", input = v}"] = { make = "bb", wrong = function() end,
    call = function(o, v) return o:ingest({ type = "tool_use", name = "Read", input = v }) end },
  ["bb:ingest{type = \"assistant\", text = v}"] = {
    make = "bb",
    call = function(o, v)
      return o:ingest({ type = "assistant", text = v })
    end,
  },
  ["bb:ingest{type = \"heartbeat\", taskId = \"t\", phase = v}"] = { make = "bb",
    call = function(o, v) return o:ingest({ type = "heartbeat", taskId = "t", phase = v }) end },
  ["bb:ingest{type = \"usage\", model = v, usage = {...}}"] = { make = "bb",
    call = function(o, v) return o:ingest({ type = "usage", model = v, usage = { input_tokens = 1 } }) end },
  ["bb:ingest{type = \"usage\", usage = {input_tokens = v}}"] = { make = "bb",
    call = function(o, v) return o:ingest({ type = "usage", usage = { input_tokens = v } }) end },
  ["bb.tick(self)"] = { make = "bb", call = function(o, v) o.tick(v) end },
  ["bb.snapshot(self)"] = { make = "bb", call = function(o, v) o.snapshot(v) end },
  ["bb.reset(self)"] = { make = "bb", call = function(o, v) o.reset(v) end },
  ["bb:addListener(fn)"] = { make = "bb", call = function(o, v) o:addListener(v) end },
  ["bb:removeListener(id)"] = { make = "bb", call = function(o, v) o:removeListener(v) end },
  ["bb.listenerErrors(self)"] = { make = "bb", call = function(o, v) o.listenerErrors(v) end },

  -- ExitStrategy and FixPlan
  ["ExitStrategy.new(config)"] = { call = function(v) return ab.ExitStrategy.new(v) end },
  ["ExitStrategy.new{type = v}"] = field(),
  ["ExitStrategy.new{type = \"auto\", threshold = v}"] = {
    call = function(v)
      return ab.ExitStrategy.new({ type = "auto", threshold = v })
    end,
  },
  ["ExitStrategy.new{type = \"done_signals\", threshold = v}"] = {
    call = function(v) return ab.ExitStrategy.new({ type = "done_signals", threshold = v }) end,
  },
  ["ExitStrategy.new{type = \"done_signals\", window = v}"] = {
    call = function(v) return ab.ExitStrategy.new({ type = "done_signals", window = v }) end,
  },
  ["ExitStrategy.new{type = \"composite\", members = v}"] = {
    call = function(v)
      return ab.ExitStrategy.new({ type = "composite", members = v })
    end,
  },
  ["ExitStrategy.new{type = \"composite\", mode = v, ...}"] = { call = function(v)
    return ab.ExitStrategy.new({ type = "composite", mode = v, members = { { type = "auto" } } })
  end },
  ["strategy:shouldExit(text)"] = { make = "strategy", call = function(o, v) o:shouldExit(v) end },
  ["strategy:shouldExit(\"x\", circuitState)"] = { make = "strategy", call = function(o, v) o:shouldExit("x", v) end },
  ["strategy.getStatus(self)"] = { make = "strategy", call = function(o, v) o.getStatus(v) end },
  ["strategy.reset(self)"] = { make = "strategy", call = function(o, v) o.reset(v) end },
  ["strategy:addListener(fn)"] = { make = "strategy", call = function(o, v) o:addListener(v) end },
  ["strategy:removeListener(id)"] = { make = "strategy", call = function(o, v) o:removeListener(v) end },
  ["strategy.listenerErrors(self)"] = { make = "strategy", call = function(o, v) o.listenerErrors(v) end },
  ["FixPlan.new(config)"] = { call = function(v) return ab.FixPlan.new(v) end },
  ["FixPlan.new{steps = v}"] = { call = function(v) return ab.FixPlan.new({ steps = v }) end },
  ["FixPlan.new{steps = {v}}"] = { call = function(v) return ab.FixPlan.new({ steps = { v } }) end },
  ["FixPlan.new{steps = {{description = v}}}"] = {
    call = function(v) return ab.FixPlan.new({ steps = { { description = v } } }) end,
  },
  ["FixPlan.new{markdown = v}"] = { call = function(v) return ab.FixPlan.new({ markdown = v }) end },
  ["FixPlan.new{steps = ..., maxAttempts = v}"] = {
    call = function(v)
      return ab.FixPlan.new({ steps = { { description = "a" } }, maxAttempts = v })
    end,
  },
  ["FixPlan.fromMarkdown(text)"] = { call = function(v) return ab.FixPlan.fromMarkdown(v) end },
  ["FixPlan.fromMarkdown(\"- [ ] a\", options)"] = {
    call = function(v)
      return ab.FixPlan.fromMarkdown("- [ ] a", v)
    end,
  },
  ["plan.getStatus(self)"] = { make = "plan", call = function(o, v) o.getStatus(v) end },

  -- Loop
  ["Loop.new(config)"] = { call = function(v) return ab.Loop.new(v) end },
  ["Loop.new{maxIterations = v}"] = field(),
  ["Loop.new{strategy = v}"] = field(),
  ["Loop.new{stagnation = v}"] = field(),
  ["Loop.new{budget = v}"] = field(),
  ["loop:observe(observation)"] = { make = "loop", call = function(o, v) return o:observe(v) end },
  ["loop:observe{output = v}"] = { make = "loop", call = function(o, v) return o:observe({ output = v }) end },
  ["loop:observe{output = \"x\", filesChanged = v}"] = { make = "loop",
    call = function(o, v) return o:observe({ output = "x", filesChanged = v }) end },
  ["loop:observe{output = \"x\", testsPassing = v}"] = { make = "loop",
    call = function(o, v) return o:observe({ output = "x", testsPassing = v }) end },
  ["loop:observe{output = \"x\", error = v}"] = {
    make = "loop",
    call = function(o, v)
      return o:observe({ output = "x", error = v })
    end,
  },
  ["loop:observe{output = \"x\", events = v}"] = {
    make = "loop",
    call = function(o, v)
      return o:observe({ output = "x", events = v })
    end,
  },
  ["loop.getStatus(self)"] = { make = "loop", call = function(o, v) o.getStatus(v) end },
  ["loop.reset(self)"] = { make = "loop", call = function(o, v) o.reset(v) end },
  ["loop:addListener(fn)"] = { make = "loop", call = function(o, v) o:addListener(v) end },
  ["loop:removeListener(id)"] = { make = "loop", call = function(o, v) o:removeListener(v) end },
  ["loop.listenerErrors(self)"] = { make = "loop", call = function(o, v) o.listenerErrors(v) end },

  -- Monitor
  ["Monitor.new(config)"] = { call = function(v) return ab.Monitor.new(v) end },
  ["Monitor.new{profile = v}"] = field(),
  ["Monitor.new{warnBefore = v}"] = field(),
  ["Monitor.new{budgetWarnPercent = v}"] = field(),
  ["Monitor.new{toolLimits = v}"] = field(),
  ["Monitor.new{toolLimits = {Bash = v}}"] = {
    call = function(v) return ab.Monitor.new({ toolLimits = { Bash = v } }) end },
  ["Monitor.new{failure = v}"] = field(),
  ["Monitor.new{stagnation = v}"] = field(),
  ["Monitor.new{budget = v}"] = field(),
  ["Monitor.new{budget = {maxToolCallsPerTask = v}}"] = {
    call = function(v) return ab.Monitor.new({ budget = { maxToolCallsPerTask = v } }) end },
  ["Monitor.new{clock = v}"] = field(),
  ["Monitor.new{listeners = v}"] = field(),
  ["monitor:observe(event)"] = { make = "monitor", call = function(o, v) return o:observe(v) end },
  ["monitor:observe{type = v}"] = { make = "monitor", call = function(o, v) return o:observe({ type = v }) end },
  ["monitor:observe{type = \"tool_use\", name = v}"] = { make = "monitor",
    call = function(o, v) return o:observe({ type = "tool_use", name = v }) end },
  ["monitor:observe{type = \"tool_use\", name = \"Read\", input = v}"] = { make = "monitor", wrong = function() end,
    call = function(o, v) return o:observe({ type = "tool_use", name = "Read", input = v }) end },
  ["monitor:observe{type = \"tool_use\", name = \"Read\", id = v}"] = { make = "monitor",
    call = function(o, v) return o:observe({ type = "tool_use", name = "Read", id = v }) end },
  ["monitor:observe{type = \"tool_use\", name = \"Read\", taskId = v}"] = { make = "monitor",
    call = function(o, v) return o:observe({ type = "tool_use", name = "Read", taskId = v }) end },
  ["monitor:observe{type = \"tool_result\", ok = v}"] = { make = "monitor", wrong = "yes",
    call = function(o, v) return o:observe({ type = "tool_result", ok = v }) end },
  ["monitor:observe{type = \"tool_result\", ok = true, text = v}"] = { make = "monitor",
    call = function(o, v) return o:observe({ type = "tool_result", ok = true, text = v }) end },
  ["monitor:observe{type = \"assistant\", text = v}"] = { make = "monitor",
    call = function(o, v) return o:observe({ type = "assistant", text = v }) end },
  ["monitor:observe{type = \"error\", text = v}"] = { make = "monitor",
    call = function(o, v) return o:observe({ type = "error", text = v }) end },
  ["monitor:observe{type = \"usage\", costCents = v}"] = { make = "monitor",
    call = function(o, v) return o:observe({ type = "usage", costCents = v }) end },
  ["monitor:observe{type = \"usage\", usage = {input_tokens = v}}"] = { make = "monitor",
    call = function(o, v) return o:observe({ type = "usage", usage = { input_tokens = v } }) end },
  ["monitor:observe{type = \"progress\", files = v}"] = { make = "monitor",
    call = function(o, v) return o:observe({ type = "progress", files = v }) end },
  ["monitor:observe{type = \"progress\", testsPassing = v}"] = { make = "monitor",
    call = function(o, v) return o:observe({ type = "progress", testsPassing = v }) end },
  ["monitor:observe{type = \"progress\", digest = v}"] = { make = "monitor",
    call = function(o, v) return o:observe({ type = "progress", digest = v }) end },
  ["monitor:observe{type = \"heartbeat\", taskId = \"t\", phase = v}"] = { make = "monitor",
    call = function(o, v) return o:observe({ type = "heartbeat", taskId = "t", phase = v }) end },
  ["monitor.tick(self)"] = { make = "monitor", call = function(o, v) o.tick(v) end },
  ["monitor.status(self)"] = { make = "monitor", call = function(o, v) o.status(v) end },
  ["monitor.snapshot(self)"] = { make = "monitor", call = function(o, v) o.snapshot(v) end },
  ["monitor:restore(snapshot)"] = { make = "monitor", call = function(o, v) o:restore(v) end },
  ["monitor:restore{version = v, ...}"] = { make = "monitor", call = function(o, v)
    o:restore({ version = v, kind = "monitor", tasks = {}, stack = {}, ignoredEvents = 0 })
  end },
  ["monitor:restore{ignoredEvents = v, ...}"] = { make = "monitor", call = function(o, v)
    o:restore({ version = 1, kind = "monitor", tasks = {}, stack = {}, ignoredEvents = v })
  end },
  ["monitor.reset(self)"] = { make = "monitor", call = function(o, v) o.reset(v) end },
  ["monitor.config(self)"] = { make = "monitor", call = function(o, v) o.config(v) end },
  ["monitor:addListener(fn)"] = { make = "monitor", call = function(o, v) o:addListener(v) end },
  ["monitor:removeListener(id)"] = { make = "monitor", call = function(o, v) o:removeListener(v) end },
  ["monitor.listenerErrors(self)"] = { make = "monitor", call = function(o, v) o.listenerErrors(v) end },
}

-- Config-field entries (`Class.new{key = v}`, or `{key = {v}}` for one item of a list): the
-- class's constructor with that one key set (a CircuitBreaker quiet, unless the key is `quiet`).
local CONSTRUCTORS = {
  CircuitBreaker = ab.CircuitBreaker.new,
  StagnationBreaker = ab.StagnationBreaker.new,
  BudgetBreaker = ab.BudgetBreaker.new,
  ExitStrategy = ab.ExitStrategy.new,
  Loop = ab.Loop.new,
  Monitor = ab.Monitor.new,
}
for name, entry in pairs(ENTRIES) do
  if entry.field then
    local class, key, shape = name:match("^(%w+)%.new{(%w+) = (.*)}$")
    local construct = assert(CONSTRUCTORS[class], "not a config-field entry: " .. name)
    local list = shape == "{v}"
    entry.call = function(v)
      local config = { [key] = list and { v } or v }
      if class == "CircuitBreaker" and key ~= "quiet" then
        config.quiet = true
      end
      return construct(config)
    end
  end
end

---------------------------------------------------------------------------------------------
-- Running one cell

local function codeOf(err)
  return type(err) == "string" and err:match("^([A-Z][A-Z_]*): ") or nil
end

-- Runs one cell; returns the outcome ("accepted" or the error code) and, for a failure to keep
-- working or an error without a code, a problem description.
local function run(entryName, column)
  local entry = ENTRIES[entryName]
  local value = column.value
  if column.wrong then
    value = entry.wrong
    if value == nil then
      value = true
    end
  end
  local object = entry.make and MAKE[entry.make]() or nil
  local ok, result
  if object then
    ok, result = pcall(entry.call, object, value)
  else
    ok, result = pcall(entry.call, value)
  end
  local outcome
  if ok then
    outcome = "accepted"
  else
    outcome = codeOf(result)
    if not outcome then
      return "?", "an error without a code: " .. tostring(result):sub(1, 200)
    end
  end
  -- The object keeps working: the one the call was made on, or the one an accepted
  -- constructor made (a constructor that refused leaves nothing behind to check).
  local subject = object
  if not subject and ok and type(result) == "userdata" and classOf(result) then
    subject = result
  end
  if subject then
    local stillOk, problem = pcall(works, subject)
    if not stillOk then
      return outcome, "the object no longer works: " .. tostring(problem)
    end
  end
  return outcome
end

---------------------------------------------------------------------------------------------
-- The document's table

-- The matrix of the document (the table whose first column is "entry point"): its header, and
-- its rows { entry = name, cells = { ... } } in order.
local function readDoc()
  local file = assert(io.open(DOC, "r"), "cannot open " .. DOC)
  local text = file:read("*a")
  file:close()
  local header, rows = nil, {}
  for line in text:gmatch("[^\n]+") do
    if not line:match("^|") then
      if header then
        break -- the end of the matrix
      end
    elseif not line:match("^|%s*%-%-%-") then
      local cells = {}
      for cell in line:gmatch("|([^|]*)") do
        cells[#cells + 1] = cell:match("^%s*(.-)%s*$")
      end
      if cells[#cells] == "" then
        cells[#cells] = nil
      end
      if header then
        local entry = table.remove(cells, 1):gsub("`", "")
        rows[#rows + 1] = { entry = entry, cells = cells }
      elseif cells[1] == "entry point" then
        header = cells
      end
    end
  end
  assert(header, DOC .. " has no table whose first column is \"entry point\"")
  return header, rows
end

-- A cell's expected outcome: its first word ("accepted" or a code).
local function expected(cell)
  return cell:match("^(%S+)")
end

if describe == nil then
  -- Run as a script: print every row as the module behaves now (to write the document).
  local names = {}
  for name in pairs(ENTRIES) do
    names[#names + 1] = name
  end
  local ok, _, rows = pcall(readDoc)
  if ok then -- keep the document's order, new entries last
    local order = {}
    for i, row in ipairs(rows) do
      order[row.entry] = i
    end
    table.sort(names, function(a, b)
      return (order[a] or 1e9) < (order[b] or 1e9) or ((order[a] or 1e9) == (order[b] or 1e9) and a < b)
    end)
  end
  for _, name in ipairs(names) do
    local cells = {}
    for i, column in ipairs(COLUMNS) do
      local outcome, problem = run(name, column)
      cells[i] = outcome .. (problem and (" !! " .. problem) or "")
    end
    print(("| `%s` | %s |"):format(name, table.concat(cells, " | ")))
  end
  return
end

local header, rows = readDoc()

describe("the bad-input matrix (" .. (jit and jit.version or _VERSION) .. ", docs/bad-input/lua.md)", function()
  it("has the columns of the spec and a row for every entry point", function()
    assert.are.equal(#COLUMNS + 1, #header)
    for i, column in ipairs(COLUMNS) do
      assert.are.equal(column.name, header[i + 1])
    end
    local documented = {}
    for _, row in ipairs(rows) do
      assert.is_not_nil(ENTRIES[row.entry], "the document names an unknown entry point: " .. row.entry)
      assert.is_nil(documented[row.entry], "a row twice: " .. row.entry)
      documented[row.entry] = true
      assert.are.equal(#COLUMNS, #row.cells, "cells of " .. row.entry)
    end
    for name in pairs(ENTRIES) do
      assert.is_true(documented[name] == true, "no row in the document for " .. name)
    end
  end)

  local cells = 0
  for _, row in ipairs(rows) do
    for i, column in ipairs(COLUMNS) do
      local cell = row.cells[i]
      if ENTRIES[row.entry] and cell then
        cells = cells + 1
        it(row.entry .. " with " .. column.name .. ": " .. cell, function()
          local outcome, problem = run(row.entry, column)
          assert.is_nil(problem, problem)
          assert.are.equal(expected(cell), outcome)
        end)
      end
    end
  end

  it("tried every cell of the table (" .. cells .. " cells)", function()
    assert.are.equal(#rows * #COLUMNS, cells)
    assert.truthy(cells > 1000)
  end)
end)

-- The hot paths (recordSuccess, shouldAllowOperation, recordProgress, check, ingest) are C
-- functions in front of the checked methods (capi.rs); both read their argument with the one
-- walker and the core's parser, so an input gets the same outcome, to the message, either way (an
-- object with a Lua listener takes the checked way).
describe("the hot paths take exactly what the checked methods take", function()
  local function raises(code, fn, ...)
    local ok, err = pcall(fn, ...)
    assert.is_false(ok, "expected " .. code)
    assert.are.equal(code, codeOf(err), tostring(err))
  end

  it("gives the same outcome and message on the C path and the checked one", function()
    local function outcome(fn, ...)
      local ok, result = pcall(fn, ...)
      return ok and "ok" or tostring(result)
    end
    local cyclic = {}
    cyclic.self = cyclic
    local inputs = { 42, "x", {}, { filesChanged = 1.5 }, { files = 1 }, { 1, 2 }, cyclic,
      { type = "tool_use" }, { type = "tool_use", name = "Bash", input = { f = print } },
      { type = "tool_use", name = "Bash", taskId = "" }, { type = "assistant", text = 0 / 0 },
      { type = "tool_use", name = "Bash", input = setmetatable({}, { __jsontype = "array" }) } }
    for _, make in ipairs({ ab.StagnationBreaker.new, ab.BudgetBreaker.new }) do
      local fast, checked = make(), make()
      checked:addListener(function() end)
      local method = fast.ingest and "ingest" or "recordProgress"
      for i, input in ipairs(inputs) do
        assert.are.equal(outcome(fast[method], fast, input), outcome(checked[method], checked, input),
          method .. " of input " .. i)
      end
    end
  end)

  it("recordProgress: unknown keys, fractions, lists and metatables", function()
    local sb = ab.StagnationBreaker.new()
    raises("INVALID_ARGUMENT", sb.recordProgress, sb, { filesChanged = 1, files = 1 })
    raises("INVALID_ARGUMENT", sb.recordProgress, sb, { filesChanged = 1.5 })
    raises("INVALID_ARGUMENT", sb.recordProgress, sb, { outputLength = "10" })
    raises("INVALID_ARGUMENT", sb.recordProgress, sb, { 1, 2, 3 })
    raises("INVALID_ARGUMENT", sb.recordProgress, sb, setmetatable({}, { __jsontype = "array" }))
    raises("INVALID_ARGUMENT", sb.recordProgress, sb, { filesChanged = ab.null, [1] = 1 })
    assert.are.equal(0, sb:getStatus().consecutiveNoProgress, "a refused iteration changed nothing")
    -- Read raw, as the full conversion reads tables: an __index does not supply counts.
    sb:recordProgress(setmetatable({}, { __index = { filesChanged = 1 } }))
    assert.are.equal(1, sb:getStatus().consecutiveNoProgress)
    sb:recordProgress({ filesChanged = 5.0, outputLength = ab.null })
    assert.are.equal(0, sb:getStatus().consecutiveNoProgress)
    sb:recordProgress({})
    assert.are.equal(1, sb:getStatus().consecutiveNoProgress)
  end)

  it("check: a marked object with the state's name", function()
    local sb = ab.StagnationBreaker.new({ noProgressThreshold = 1 })
    local c = sb:check()
    assert.are.same({ allowContinue = true, state = "CLOSED" }, c)
    assert.are.equal("object", getmetatable(c).__jsontype)
    sb:recordProgress({})
    assert.are.same({ allowContinue = true, state = "HALF_OPEN",
      reason = "No progress in 1 consecutive iterations", slug = "no_progress" }, sb:check())
    sb:recordProgress({})
    assert.are.equal("OPEN", sb:check().state)
    assert.is_false(sb:check().allowContinue)
  end)

  it("ingest: extra keys, inputs that have no JSON form, and taskIds the core refuses", function()
    local bb = ab.BudgetBreaker.new({ maxToolCallsPerTask = 2 })
    local tool = function(extra)
      local e = { type = "tool_use", name = "Bash" }
      for k, v in pairs(extra) do
        e[k] = v
      end
      return e
    end
    raises("INVALID_EVENT", bb.ingest, bb, tool({ callback = function() end }))
    raises("INVALID_EVENT", bb.ingest, bb, tool({ input = { limit = 0 / 0 } }))
    raises("INVALID_EVENT", bb.ingest, bb, tool({ input = { [1] = "a", [3] = "c" } }))
    raises("INVALID_EVENT", bb.ingest, bb, tool({ input = { "a", key = "b" } }))
    raises("INVALID_EVENT", bb.ingest, bb, tool({ input = { io.stdout } }))
    raises("INVALID_EVENT", bb.ingest, bb, tool({ taskId = "" }))
    raises("INVALID_EVENT", bb.ingest, bb, tool({ taskId = string.rep("t", 257) }))
    raises("INVALID_EVENT", bb.ingest, bb, tool({ taskId = 7 }))
    raises("INVALID_EVENT", bb.ingest, bb, { type = "tool_use", name = 7 })
    raises("INVALID_EVENT", bb.ingest, bb, { type = "assistant", text = false })
    assert.are.same({}, bb:snapshot().tasks, "a refused event changed nothing")
    -- Deep inputs are taken, up to the depth every binding takes (interop::MAX_DEPTH: 127 tables,
    -- the event's own included).
    local deep = {}
    for _ = 1, 125 do
      deep = { deep }
    end
    assert.is_nil(bb:ingest(tool({ input = deep, taskId = "deep" })))
    assert.is_nil(bb:ingest(tool({ input = { args = { "-q", "--all" }, env = {}, n = 2 }, taskId = "t" })))
    local halt = bb:ingest(tool({ taskId = "t" }))
    assert.is_nil(halt)
    halt = bb:ingest(tool({ taskId = "t" }))
    assert.are.equal("ToolCallLimit", halt.kind)
    assert.are.equal("t", halt.taskId)
    assert.are.equal("object", getmetatable(halt).__jsontype)
    -- Invalid UTF-8 becomes U+FFFD on both paths.
    bb:ingest(tool({ taskId = "t\255" }))
    bb:ingest(setmetatable(tool({ taskId = "u\255" }), { __jsontype = "object" }))
    local ids = {}
    for _, task in ipairs(bb:snapshot().tasks) do
      ids[task.taskId] = task.toolCalls
    end
    assert.are.same({ deep = 1, t = 3, ["t\239\191\189"] = 1, ["u\239\191\189"] = 1 }, ids)
  end)

  it("refuses a key, or a config's string, that is not UTF-8; names a boolean key", function()
    -- Two keys would become one (U+FFFD each) and a statePath would name another file.
    raises("INVALID_CONFIG", ab.Monitor.new, { toolLimits = { ["fetch\255"] = 1, ["fetch\254"] = 100 } })
    raises("INVALID_CONFIG", ab.CircuitBreaker.new, { statePath = "/tmp/agentbreaker-st\255.json" })
    local m = ab.Monitor.new()
    raises("INVALID_EVENT", m.observe, m, { type = "tool_use", name = "x", input = { ["a\255"] = 1 } })
    local ok, err = pcall(ab.CircuitBreaker.new, { [true] = 1 })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("a key of type a boolean", 1, true), tostring(err))
    -- An event's text stays lossy: a tool's output need not be UTF-8.
    local verdict = m:observe({ type = "tool_result", ok = true, text = "bad \255 byte" })
    assert.are.equal("continue", verdict.action)
  end)

  it("ingest: an assistant event on the quick path runs the output-loop check", function()
    local bb = ab.BudgetBreaker.new()
    assert.is_nil(bb:ingest({ type = "assistant", text = "same words here" }))
    assert.is_nil(bb:ingest({ type = "assistant", text = "same words here" }))
    local halt = bb:ingest({ type = "assistant", text = "here words same" })
    assert.are.equal("OutputLoop", halt.kind)
    assert.are.equal("session", halt.taskId)
  end)
end)

