-- The Lua API beyond the conformance scenarios: seed 004 fields, errors as strings with codes,
-- wrong Lua types, guarded calls, listeners, options, conversions, persistence and collection.

local ab = require("agentbreaker")
local json = require("dkjson")

local HAS_WARN = type(warn) == "function"
local CAN_YIELD_IN_PCALL = _VERSION ~= "Lua 5.1" or jit ~= nil

local function codeOf(err)
  return type(err) == "string" and err:match("^([A-Z][A-Z_]*): ") or nil
end

-- Asserts that fn(...) raises a string error beginning with `code: ` and returns the message.
local function expectCode(code, fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected " .. code .. ", but the call succeeded")
  assert.is_string(err, "errors are strings, got " .. type(err))
  assert.are.equal(code, codeOf(err), "unexpected error: " .. tostring(err))
  return err
end

local function quietBreaker(config)
  config = config or {}
  config.quiet = true
  return ab.CircuitBreaker.new(config)
end

local function tmpDir()
  local lfs = require("lfs")
  local path = os.tmpname()
  os.remove(path)
  assert(lfs.mkdir(path))
  return path, function()
    for name in lfs.dir(path) do
      if name ~= "." and name ~= ".." then
        os.remove(path .. "/" .. name)
      end
    end
    lfs.rmdir(path)
  end
end

local function collect()
  for _ = 1, 4 do
    collectgarbage("collect")
  end
end

describe("the module (" .. (jit and jit.version or _VERSION) .. ")", function()
  it("exposes every type of the contract on the module table", function()
    for _, name in ipairs({ "CircuitBreaker", "StagnationBreaker", "BudgetBreaker", "ExitStrategy",
      "FixPlan", "Loop", "Monitor", "ManualClock", "SystemClock" }) do
      assert.is_table(ab[name], name)
    end
    for _, name in ipairs({ "analyze", "fingerprint", "configFromEnv" }) do
      assert.is_function(ab[name], name)
    end
    assert.is_string(ab.VERSION)
    assert.are.equal("userdata", type(ab.null))
  end)

  it("is one module per Lua state, also when required again", function()
    package.loaded.agentbreaker = nil
    local again = require("agentbreaker")
    assert.are.equal(ab, again)
    local cb = again.CircuitBreaker.new({ quiet = true })
    cb:recordFailure("x")
    assert.are.equal(1, cb.consecutiveFailures)
    package.loaded.agentbreaker = ab
  end)
end)

describe("CircuitBreaker, seed 004 compatibility", function()
  it("new() has the seed's defaults and readable fields", function()
    local cb = ab.CircuitBreaker.new()
    assert.are.equal("CLOSED", cb.state)
    assert.are.equal(0, cb.consecutiveFailures)
    assert.are.equal(5, cb.threshold)
    assert.are.equal(30, cb.cooldownSeconds)
    assert.is_nil(cb.openedAt)
    assert.are.same({}, cb.failureHistory)
    assert.is_nil(cb.noSuchField)
  end)

  it("shouldAllowOperation returns two values, the second nil when CLOSED", function()
    local cb = quietBreaker()
    assert.are.equal(2, select("#", cb:shouldAllowOperation()))
    local allowed, message = cb:shouldAllowOperation()
    assert.is_true(allowed)
    assert.is_nil(message)
  end)

  it("reads fields live, with the seed's seconds for openedAt and timestamp", function()
    local clock = ab.ManualClock.new(12345)
    local cb = quietBreaker({ clock = clock })
    for i = 1, 5 do
      cb:recordFailure("Path not found: " .. i)
    end
    assert.are.equal("OPEN", cb.state)
    assert.are.equal(5, cb.consecutiveFailures)
    assert.are.equal(12, cb.openedAt)
    assert.are.equal(12345, cb:getStatus().openedAt)
    local history = cb.failureHistory
    assert.are.equal(5, #history)
    assert.are.same({ atMs = 12345, timestamp = 12, error = "Path not found: 1", state = "CLOSED" },
      history[1])
    assert.are.equal(12, cb:getStatus().failureHistory[1].timestamp)
    -- a snapshot has the contract's shape only (restore is strict)
    assert.is_nil(cb:snapshot().failureHistory[1].timestamp)
  end)

  it("reports the current cooldown in seconds, fractional when it is not whole", function()
    local cb = quietBreaker({ cooldownMs = 2500, maxCooldownMs = 10000, backoffMultiplier = 2 })
    assert.are.equal(2.5, cb.cooldownSeconds)
  end)

  it("has read-only fields with a clear error", function()
    local cb = quietBreaker()
    local err = expectCode("INVALID_ARGUMENT", function() cb.threshold = 3 end)
    assert.truthy(err:find("failureThreshold", 1, true))
    expectCode("INVALID_ARGUMENT", function() cb.state = "OPEN" end)
    expectCode("INVALID_ARGUMENT", function() cb.anything = 1 end)
    assert.are.equal(5, cb.threshold)
  end)

  it("lets code add methods to the class", function()
    function ab.CircuitBreaker:isTripped()
      return self.state == "OPEN"
    end
    local cb = quietBreaker({ failureThreshold = 1 })
    assert.is_false(cb:isTripped())
    cb:recordFailure("x")
    assert.is_true(cb:isTripped())
    ab.CircuitBreaker.isTripped = nil
  end)

  it("lets code replace the hot-path methods of the class, also for existing breakers", function()
    local cb = quietBreaker({ failureThreshold = 1 })
    local originals = { ab.CircuitBreaker.recordSuccess, ab.CircuitBreaker.shouldAllowOperation }
    local calls = {}
    function ab.CircuitBreaker:recordSuccess()
      calls[#calls + 1] = "recordSuccess"
      return originals[1](self)
    end
    ab.CircuitBreaker.shouldAllowOperation = function(_)
      calls[#calls + 1] = "shouldAllowOperation"
      return false, "patched"
    end
    cb:recordSuccess()
    local allowed, message = cb:shouldAllowOperation()
    ab.CircuitBreaker.recordSuccess, ab.CircuitBreaker.shouldAllowOperation = originals[1], originals[2]
    assert.are.same({ "recordSuccess", "shouldAllowOperation" }, calls)
    assert.is_false(allowed)
    assert.are.equal("patched", message)
    -- Restored: the breaker's own again.
    assert.is_true((cb:shouldAllowOperation()))
    assert.are.equal(2, #calls)
  end)

  it("raises an error, not a crash, when a finalizer brings back a finalized breaker", function()
    local function finalizer(holder, f)
      if newproxy then -- Lua 5.1 and LuaJIT: only userdata have finalizers
        local u = newproxy(true)
        getmetatable(u).__gc = f
        holder.u = u
        return holder
      end
      return setmetatable(holder, { __gc = f })
    end
    local back
    do
      local cb = quietBreaker()
      cb:recordSuccess()
      finalizer({ cb = cb }, function() back = cb end) -- (the holder is garbage at once)
    end
    collect()
    collect()
    assert.truthy(back, "the finalizer ran")
    for _, call in ipairs({
      function() back:recordSuccess() end,
      function() return back:shouldAllowOperation() end,
      function() back:recordFailure("x") end,
    }) do
      local ok, err = pcall(call)
      if newproxy then
        -- Lua 5.1 and LuaJIT keep what a finalizer reaches alive and unfinalized: it still works.
        assert.is_true(ok, tostring(err))
      else
        -- Lua 5.4 finalizes it too (its Rust value is gone): an error.
        assert.is_false(ok)
        assert.are.equal("INVALID_ARGUMENT", codeOf(err), tostring(err))
      end
    end
    back = nil
    collect()
  end)

  it("takes the contract's config keys beyond the seed", function()
    local clock = ab.ManualClock.new(0)
    local cb = quietBreaker({ clock = clock, identicalErrorThreshold = 3, errorMatch = "template",
      backoffMultiplier = 2 })
    cb:recordFailure("Path not found: ServerScriptService.Main")
    cb:recordFailure("Path not found: ServerScriptService.MainHandler")
    cb:recordFailure("Path not found: ServerScriptService.Scripts.Main")
    assert.are.equal("OPEN", cb.state)
    clock:set(30000)
    assert.is_true((cb:shouldAllowOperation()))
    cb:recordFailure("still not found")
    assert.are.equal(60, cb.cooldownSeconds)
    expectCode("INVALID_CONFIG", ab.CircuitBreaker.new, { failureTreshold = 3 })
    expectCode("INVALID_CONFIG", ab.CircuitBreaker.new, 42)
    expectCode("INVALID_CONFIG", ab.CircuitBreaker.new, "failureThreshold=3")
  end)

  it("is quiet with quiet = true and hands the lines to log = function(level, line)", function()
    local lines = {}
    local cb = ab.CircuitBreaker.new({ failureThreshold = 4, log = function(level, line)
      lines[#lines + 1] = level .. " " .. line
    end })
    for _ = 1, 4 do
      cb:recordFailure("x")
    end
    assert.are.same({
      "warn [Circuit Breaker] Warning: 3 consecutive failures. 1 more will open circuit.",
      "print [Circuit Breaker] OPENED: 4 consecutive failures detected.",
    }, lines)
    local printed = 0
    local savedPrint = _G.print
    _G.print = function() printed = printed + 1 end
    local ok = pcall(function()
      local q = ab.CircuitBreaker.new({ quiet = true, failureThreshold = 1 })
      q:recordFailure("x")
    end)
    _G.print = savedPrint
    assert.is_true(ok)
    assert.are.equal(0, printed)
    expectCode("INVALID_CONFIG", ab.CircuitBreaker.new, { quiet = "yes" })
    expectCode("INVALID_CONFIG", ab.CircuitBreaker.new, { log = "print" })
  end)

  it("warns through warn where the host has it, else prints", function()
    local seen = {}
    local savedPrint, savedWarn = _G.print, _G.warn
    _G.print = function(line) seen[#seen + 1] = "print " .. line end
    if HAS_WARN then
      _G.warn = function(line) seen[#seen + 1] = "warn " .. line end
    end
    local ok, err = pcall(function()
      local cb = ab.CircuitBreaker.new()
      for _ = 1, 3 do
        cb:recordFailure("x")
      end
    end)
    _G.print, _G.warn = savedPrint, savedWarn
    assert.is_true(ok, err)
    local channel = HAS_WARN and "warn" or "print"
    assert.are.same({ channel .. " [Circuit Breaker] Warning: 3 consecutive failures. 2 more will open circuit." },
      seen)
  end)
end)

describe("errors", function()
  it("are strings beginning with the code", function()
    local cb = quietBreaker()
    local err = expectCode("INVALID_ARGUMENT", cb.recordFailure, cb, 42)
    assert.truthy(err:find("recordFailure", 1, true))
    expectCode("INVALID_ARGUMENT", cb.recordFailure, cb, true)
    expectCode("INVALID_ARGUMENT", cb.recordFailure, cb, nil)
    expectCode("INVALID_ARGUMENT", cb.recordFailure, cb, { message = "x" })
    expectCode("INVALID_SNAPSHOT", cb.restore, cb, "not a snapshot")
    expectCode("IO", cb.save, cb, "/nonexistent-agentbreaker-dir/state.json")
    expectCode("INVALID_ARGUMENT", ab.analyze, 42)
  end)

  it("name the method when it is called with a dot or on another object", function()
    local cb = quietBreaker()
    local err = expectCode("INVALID_ARGUMENT", cb.recordFailure, "x")
    assert.truthy(err:find("cb:recordFailure", 1, true) or err:find("obj:recordFailure", 1, true))
    local sb = ab.StagnationBreaker.new()
    expectCode("INVALID_ARGUMENT", ab.CircuitBreaker.recordFailure, sb, "x")
    expectCode("INVALID_ARGUMENT", ab.StagnationBreaker.check, cb)
    expectCode("INVALID_ARGUMENT", ab.ManualClock.new(0).set, cb, 5)
  end)

  it("reject NaN and infinities with the code of the argument they are in", function()
    expectCode("INVALID_ARGUMENT", ab.ManualClock.new, 0 / 0)
    local clock = ab.ManualClock.new(0)
    expectCode("INVALID_ARGUMENT", clock.set, clock, math.huge)
    expectCode("INVALID_ARGUMENT", clock.advance, clock, -math.huge)
    local sb = ab.StagnationBreaker.new()
    expectCode("INVALID_ARGUMENT", sb.recordProgress, sb, { filesChanged = 0 / 0 })
    expectCode("INVALID_CONFIG", ab.CircuitBreaker.new, { backoffMultiplier = 0 / 0 })
    expectCode("INVALID_CONFIG", ab.BudgetBreaker.new, { similarityJaccardThreshold = math.huge })
    local bb = ab.BudgetBreaker.new()
    expectCode("INVALID_EVENT", bb.ingest, bb, { type = "usage", usage = { input_tokens = 0 / 0 } })
    expectCode("INVALID_SNAPSHOT", sb.restore, sb, { version = 0 / 0 })
  end)

  it("never crash the interpreter, whatever the arguments", function()
    -- (strings are paths that cannot be written: save/load get them too)
    local weird = { false, true, 0, -1, 1.5, 0 / 0, math.huge, "", "/nonexistent-agentbreaker-dir/x",
      {}, { 1, 2 }, { a = { b = {} } },
      function() end, coroutine.create(function() end), ab.null, io.stdout, ab.ManualClock.new(0) }
    local objects = {
      CircuitBreaker = quietBreaker(),
      StagnationBreaker = ab.StagnationBreaker.new(),
      BudgetBreaker = ab.BudgetBreaker.new(),
      ExitStrategy = ab.ExitStrategy.new({ type = "auto" }),
      Loop = ab.Loop.new(),
      Monitor = ab.Monitor.new(),
    }
    local calls = 0
    local function try(fn, ...)
      calls = calls + 1
      local ok, err = pcall(fn, ...)
      if not ok then
        assert.is_string(err)
        assert.truthy(codeOf(err), "error without a code: " .. tostring(err))
      end
    end
    for name, object in pairs(objects) do
      for methodName, method in pairs(ab[name]) do
        if type(method) == "function" and methodName ~= "new" and methodName ~= "call"
          and methodName ~= "pcall" then
          try(method, object)
          for _, a in ipairs(weird) do
            try(method, object, a)
            try(method, a, a)
            try(method, object, a, a)
          end
        end
      end
      for _, a in ipairs(weird) do
        try(ab[name].new, a)
      end
    end
    for _, fn in ipairs({ ab.analyze, ab.fingerprint, ab.configFromEnv, ab.ManualClock.new,
      ab.FixPlan.new, ab.FixPlan.fromMarkdown }) do
      for _, a in ipairs(weird) do
        try(fn, a)
        try(fn, a, a)
      end
    end
    assert.truthy(calls > 1000)
  end)
end)

describe("Lua values as JSON", function()
  it("take an empty table as an object, or as a list under the contract's list keys", function()
    local cb = quietBreaker()
    cb:restore({ version = 1, kind = "failure", state = "CLOSED", consecutiveFailures = 0,
      backoffLevel = 0, trips = 0, failureHistory = {} })
    local l = ab.Loop.new({ budget = {}, stagnation = {} })
    assert.are.equal("continue", l:observe({ output = "Working.", events = {} }).action)
    assert.is_table(l:getStatus().budget)
    local plan = ab.FixPlan.new({ steps = {} })
    assert.is_true(plan:shouldExit("anything").exit)
    expectCode("INVALID_CONFIG", ab.ExitStrategy.new, { type = "composite", members = {} })
  end)

  it("reject mixed, sparse and cyclic tables and functions", function()
    local sb = ab.StagnationBreaker.new()
    expectCode("INVALID_ARGUMENT", sb.recordProgress, sb, { 1, filesChanged = 1 })
    expectCode("INVALID_ARGUMENT", sb.recordProgress, sb, { [2] = 1 })
    local cyclic = {}
    cyclic.self = cyclic
    expectCode("INVALID_ARGUMENT", sb.recordProgress, sb, cyclic)
    expectCode("INVALID_CONFIG", ab.StagnationBreaker.new, { noProgressThreshold = print })
    expectCode("INVALID_CONFIG", ab.StagnationBreaker.new, { [true] = 1 })
  end)

  it("accept whole floats where whole numbers belong (Lua 5.1 has no integers)", function()
    local cb = quietBreaker({ failureThreshold = 2.0, cooldownMs = 1000.0 })
    assert.are.equal(2, cb.threshold)
    expectCode("INVALID_CONFIG", ab.CircuitBreaker.new, { failureThreshold = 2.5 })
  end)

  it("mark returned lists and objects so that a JSON encoder keeps them apart", function()
    local sb = ab.StagnationBreaker.new()
    local text = json.encode(sb:getStatus())
    assert.truthy(text:find('"errorCounts":{}', 1, true))
    assert.truthy(text:find('"outputTrend":[]', 1, true))
    local cb = quietBreaker()
    local snapshotText = json.encode(cb:snapshot())
    assert.truthy(snapshotText:find('"failureHistory":[]', 1, true))
    -- and the decoded text restores
    cb:restore(json.decode(snapshotText, 1, ab.null))
  end)

  it("round-trip a snapshot with nulls (openedAt) and an open circuit", function()
    local clock = ab.ManualClock.new(1000)
    local cb = quietBreaker({ clock = clock, failureThreshold = 1 })
    cb:recordFailure("boom")
    local snapshot = cb:snapshot()
    local other = quietBreaker({ clock = clock })
    other:restore(snapshot)
    assert.are.equal("OPEN", other.state)
    assert.are.equal(1, other.openedAt)
    local closed = quietBreaker():snapshot()
    assert.is_nil(closed.openedAt)
    closed.openedAt = ab.null
    other:restore(closed)
    assert.are.equal("CLOSED", other.state)
  end)

  it("nest at most 127 tables, the outermost included, as in every binding", function()
    local function nested(levels, inner)
      local t = { inner }
      for _ = 2, levels do
        t = { t }
      end
      return t
    end
    local bb = ab.BudgetBreaker.new()
    -- The event is a table too: its input may nest 126.
    assert.is_nil(bb:ingest({ type = "tool_use", name = "x", input = nested(126) }))
    local err = expectCode("INVALID_EVENT", bb.ingest, bb, { type = "tool_use", name = "x", input = nested(127) })
    assert.truthy(err:find("nested more than 127 levels", 1, true), err)
    -- Only tables count: a value inside the deepest table is fine.
    assert.is_nil(bb:ingest({ type = "tool_use", name = "y", input = nested(126, "z") }))
  end)

  it("replace invalid UTF-8 in texts", function()
    local cb = quietBreaker()
    cb:recordFailure("bad \255 byte")
    assert.are.equal("bad \239\191\189 byte", cb.failureHistory[1].error)
  end)
end)

describe("guarded calls", function()
  it("return the function's results and record a success", function()
    local cb = quietBreaker()
    cb:recordFailure("x")
    local a, b, c = cb:call(function(x, y) return x + y, nil, "z" end, 1, 2)
    assert.are.equal(3, a)
    assert.is_nil(b)
    assert.are.equal("z", c)
    assert.are.equal(3, select("#", cb:call(function() return 1, nil, nil end)))
    assert.are.equal(0, cb.consecutiveFailures)
  end)

  it("record a failure with the error's text and raise the error again unchanged", function()
    local cb = quietBreaker()
    local errorObject = setmetatable({}, { __tostring = function() return "custom failure" end })
    local ok, err = pcall(cb.call, cb, function() error(errorObject) end)
    assert.is_false(ok)
    assert.are.equal(errorObject, err)
    assert.are.equal("custom failure", cb.failureHistory[1].error)
    ok, err = pcall(cb.call, cb, function() error("Path not found", 0) end)
    assert.is_false(ok)
    assert.are.equal("Path not found", err)
    assert.are.equal("Path not found", cb.failureHistory[2].error)
  end)

  it("refuse with CIRCUIT_OPEN without running the function", function()
    local cb = quietBreaker({ failureThreshold = 1 })
    cb:recordFailure("x")
    local ran = false
    local err = expectCode("CIRCUIT_OPEN", cb.call, cb, function() ran = true end)
    assert.is_false(ran)
    assert.truthy(err:find("30 seconds remaining", 1, true))
  end)

  it("pcall returns true, results... or false, err and never raises for the outcome", function()
    local cb = quietBreaker({ failureThreshold = 1 })
    assert.are.same({ true, 7 }, { cb:pcall(function() return 7 end) })
    local ok, err = cb:pcall(function() error("boom", 0) end)
    assert.is_false(ok)
    assert.are.equal("boom", err)
    ok, err = cb:pcall(function() return 1 end)
    assert.is_false(ok)
    assert.are.equal("CIRCUIT_OPEN", codeOf(err))
  end)

  it("accept callable tables and reject what cannot be called", function()
    local cb = quietBreaker()
    local callable = setmetatable({}, { __call = function(_, x) return x * 2 end })
    assert.are.equal(10, cb:call(callable, 5))
    expectCode("INVALID_ARGUMENT", cb.call, cb, 42)
    expectCode("INVALID_ARGUMENT", cb.call, cb, nil)
    assert.are.equal(0, cb.consecutiveFailures)
  end)

  it("work inside coroutines (the function may yield where pcall can)", function()
    if not CAN_YIELD_IN_PCALL then
      return -- Lua 5.1 cannot yield across pcall
    end
    local cb = quietBreaker()
    local co = coroutine.wrap(function()
      return cb:call(function()
        local v = coroutine.yield("waiting")
        return v .. " done"
      end)
    end)
    assert.are.equal("waiting", co())
    assert.are.equal("tool done", co("tool"))
    assert.are.equal(0, cb.consecutiveFailures)
  end)
end)

describe("listeners", function()
  it("receive events as tables, in order, and can be removed", function()
    local clock = ab.ManualClock.new(0)
    local cb = quietBreaker({ clock = clock })
    local seen = {}
    local id = cb:addListener(function(e) seen[#seen + 1] = e end)
    for _ = 1, 5 do
      cb:recordFailure("x")
    end
    assert.are.same({ type = "warning", atMs = 0,
      message = "Warning: 3 consecutive failures. 2 more will open circuit." }, seen[1])
    assert.are.same({ type = "stateChange", from = "CLOSED", to = "OPEN",
      reason = "5 consecutive failures detected", slug = "consecutive_failures", atMs = 0 },
      seen[2])
    assert.is_true(cb:removeListener(id))
    assert.is_false(cb:removeListener(id))
    assert.is_false(cb:removeListener(12345))
    cb:reset()
    assert.are.equal(2, #seen)
    expectCode("INVALID_ARGUMENT", cb.addListener, cb, "not a function")
    expectCode("INVALID_ARGUMENT", cb.removeListener, cb, "x")
  end)

  it("are isolated: an error is counted and the breaker goes on", function()
    local after = 0
    local cb = quietBreaker({ failureThreshold = 1, listeners = {
      function() error("listener bug") end,
      function() after = after + 1 end,
    } })
    cb:recordFailure("x")
    assert.are.equal("OPEN", cb.state)
    assert.are.equal(1, after)
    assert.are.equal(1, cb:listenerErrors())
  end)

  it("may call back into the breaker; the events that causes come after", function()
    local clock = ab.ManualClock.new(0)
    local cb = quietBreaker({ clock = clock, failureThreshold = 1, cooldownMs = 0 })
    local order = {}
    cb:addListener(function(e)
      order[#order + 1] = e.to
      if e.to == "OPEN" then
        assert.are.equal("OPEN", cb.state)
        cb:shouldAllowOperation() -- OPEN -> HALF_OPEN from inside the listener
        order[#order + 1] = "listener done"
      end
    end)
    cb:recordFailure("x")
    assert.are.same({ "OPEN", "listener done", "HALF_OPEN" }, order)
  end)

  it("from the config are added in order, after the seed's log line", function()
    local order = {}
    local cb = ab.CircuitBreaker.new({
      failureThreshold = 1,
      log = function() order[#order + 1] = "log" end,
      listeners = { function() order[#order + 1] = "first" end, function() order[#order + 1] = "second" end },
    })
    cb:recordFailure("x")
    assert.are.same({ "log", "first", "second" }, order)
    expectCode("INVALID_CONFIG", ab.CircuitBreaker.new, { listeners = function() end })
    expectCode("INVALID_CONFIG", ab.CircuitBreaker.new, { listeners = { 42 } })
    expectCode("INVALID_CONFIG", ab.CircuitBreaker.new, { listeners = { f = print } })
  end)

  it("are called when the breaker is used inside a coroutine", function()
    local seen = 0
    local cb = quietBreaker({ failureThreshold = 1, listeners = { function() seen = seen + 1 end } })
    local co = coroutine.create(function()
      cb:recordFailure("x")
      coroutine.yield()
      cb:reset()
    end)
    assert.is_true((coroutine.resume(co)))
    assert.are.equal(1, seen)
    assert.is_true((coroutine.resume(co)))
    assert.are.equal(2, seen)
  end)

  it("do not keep a collected breaker's functions alive", function()
    local weak = setmetatable({}, { __mode = "k" })
    do
      local f = function() end
      weak[f] = true
      local cb = quietBreaker({ listeners = { f } })
      cb:addListener(f)
      cb:recordFailure("x")
    end
    collect()
    ab.analyze("") -- any call into the module releases what collected objects held
    collect()
    assert.is_nil(next(weak))
  end)

  it("let go of a removed function", function()
    local weak = setmetatable({}, { __mode = "k" })
    local cb = quietBreaker()
    do
      local f = function() end
      weak[f] = true
      cb:removeListener(cb:addListener(f))
    end
    collect()
    assert.is_nil(next(weak))
  end)

  it("exist on every event source", function()
    local clock = ab.ManualClock.new(0)
    local halts = {}
    local bb = ab.BudgetBreaker.new({ clock = clock, maxToolCallsPerTask = 1 })
    bb:addListener(function(e) halts[#halts + 1] = e end)
    bb:ingest({ type = "tool_use", name = "grep" })
    local halt = bb:ingest({ type = "tool_use", name = "grep" })
    assert.are.equal("tool_call_limit", halt.slug)
    assert.are.equal("halt", halts[1].type)
    assert.are.equal("tool calls: 2 of 1", halts[1].halt.message)
    for _, object in ipairs({ ab.StagnationBreaker.new(), ab.ExitStrategy.new({ type = "auto" }), ab.Loop.new() }) do
      local id = object:addListener(function() end)
      assert.is_true(object:removeListener(id))
      assert.are.equal(0, object:listenerErrors())
    end
  end)
end)

describe("clocks", function()
  it("ManualClock moves only when told, and is shared by breakers", function()
    local clock = ab.ManualClock.new()
    assert.are.equal(0, clock:now())
    clock:set(1000)
    clock:advance(500)
    assert.are.equal(1500, clock:now())
    clock:set(2 ^ 53)
    assert.are.equal(2 ^ 53, clock:now())
    clock:set(0)
    local a = quietBreaker({ clock = clock, failureThreshold = 1 })
    local b = quietBreaker({ clock = clock, failureThreshold = 1 })
    a:recordFailure("x")
    b:recordFailure("x")
    clock:advance(30000)
    assert.is_true((a:shouldAllowOperation()))
    assert.is_true((b:shouldAllowOperation()))
    expectCode("INVALID_ARGUMENT", clock.set, clock, -5)
    expectCode("INVALID_ARGUMENT", clock.set, clock, 1.5)
    expectCode("INVALID_ARGUMENT", clock.set, clock, "5")
    expectCode("INVALID_CONFIG", ab.CircuitBreaker.new, { clock = 42 })
    assert.truthy(tostring(clock):find("ManualClock", 1, true))
  end)

  it("SystemClock reads epoch milliseconds and cannot be moved", function()
    local clock = ab.SystemClock.new()
    assert.truthy(math.abs(clock:now() / 1000 - os.time()) < 5)
    expectCode("INVALID_ARGUMENT", clock.set, clock, 5)
    local cb = quietBreaker({ clock = clock })
    cb:recordFailure("x")
    assert.truthy(math.abs(cb.failureHistory[1].timestamp - os.time()) < 5)
  end)
end)

describe("persistence", function()
  it("saves and loads state files, and statePath keeps one", function()
    local dir, cleanup = tmpDir()
    local ok, err = pcall(function()
      local clock = ab.ManualClock.new(0)
      local cb = quietBreaker({ clock = clock, failureThreshold = 1 })
      cb:recordFailure("x")
      cb:save(dir .. "/state.json")
      local fresh = quietBreaker({ clock = clock })
      assert.is_true(fresh:load(dir .. "/state.json"))
      assert.are.equal("OPEN", fresh.state)
      assert.is_false(fresh:load(dir .. "/missing.json"))
      local kept = quietBreaker({ clock = clock, failureThreshold = 1, statePath = dir .. "/kept.json" })
      kept:recordFailure("x")
      local restarted = quietBreaker({ clock = clock, statePath = dir .. "/kept.json" })
      assert.are.equal("OPEN", restarted.state)
      local f = assert(io.open(dir .. "/corrupt.json", "w"))
      f:write("{not json")
      f:close()
      expectCode("INVALID_SNAPSHOT", fresh.load, fresh, dir .. "/corrupt.json")
      expectCode("INVALID_SNAPSHOT", ab.CircuitBreaker.new, { statePath = dir .. "/corrupt.json" })
      expectCode("INVALID_ARGUMENT", fresh.save, fresh, 42)
    end)
    cleanup()
    assert.is_true(ok, err)
  end)
end)

describe("the other types", function()
  it("StagnationBreaker takes iterations and errors as tables and strings", function()
    local sb = ab.StagnationBreaker.new({ sameErrorThreshold = 2 })
    sb:recordProgress({ filesChanged = 1 })
    sb:recordError("Disk full", { transient = true })
    sb:recordError("Disk full")
    assert.are.same({ allowContinue = true, state = "CLOSED" }, sb:check())
    sb:recordError("Disk full", {})
    local decision = sb:check()
    assert.is_false(decision.allowContinue)
    assert.are.equal("OPEN", decision.state)
    expectCode("INVALID_ARGUMENT", sb.recordError, sb, "x", { transient = "yes" })
    expectCode("INVALID_ARGUMENT", sb.recordError, sb, "x", { transcient = true })
    expectCode("INVALID_ARGUMENT", sb.recordError, sb, "x", true)
    sb:reset()
    assert.are.equal("CLOSED", sb:getStatus().state)
    assert.truthy(tostring(sb):find("StagnationBreaker", 1, true))
  end)

  it("BudgetBreaker returns a halt or nil, and tick a list", function()
    local clock = ab.ManualClock.new(0)
    local bb = ab.BudgetBreaker.new({ clock = clock, maxIdleSecs = 10 })
    assert.is_nil(bb:ingest({ type = "heartbeat", taskId = "t1", phase = "starting" }))
    assert.are.same({}, bb:tick())
    clock:set(11000)
    local halts = bb:tick()
    assert.are.equal(1, #halts)
    assert.are.equal("idle_timeout", halts[1].slug)
    assert.are.equal(11, halts[1].idleSecs)
    assert.are.equal(1, #bb:snapshot().tasks)
    expectCode("INVALID_EVENT", bb.ingest, bb, "tool_use")
    expectCode("INVALID_EVENT", bb.ingest, bb, nil)
  end)

  it("analyze and fingerprint", function()
    local analysis = ab.analyze("All tasks complete, nothing left to do. 42 tests passed.")
    assert.are.equal(90, analysis.confidence)
    assert.is_true(analysis.completionSignal.detected)
    assert.are.same({ "all tasks complete", "nothing left to do" }, analysis.completionSignal.phrases)
    assert.are.equal(42, analysis.testsPassing)
    assert.is_nil(analysis.exitSignal)
    assert.are.equal("Path not found: <path>",
      ab.fingerprint("Path not found: ServerScriptService.Main", "template"))
    assert.are.equal("took # ms", ab.fingerprint("took 15 ms"))
    expectCode("INVALID_ARGUMENT", ab.fingerprint, "x", "fuzzy")
  end)

  it("ExitStrategy takes the response text and the circuit state", function()
    local s = ab.ExitStrategy.new({ type = "composite", members = { { type = "auto" }, { type = "circuit_breaker" } } })
    assert.are.same({ exit = false }, s:shouldExit("Working."))
    assert.are.same({ exit = true, reason = "circuit_open" }, s:shouldExit("Working.", "OPEN"))
    assert.are.same({ exit = true, reason = "completed" },
      s:shouldExit("All tasks complete, nothing left to do. 42 tests passed."))
    expectCode("INVALID_ARGUMENT", s.shouldExit, s, "x", "open")
    expectCode("INVALID_ARGUMENT", s.shouldExit, s, ab.analyze("done"))
    assert.is_nil(s:getStatus())
  end)

  it("FixPlan from steps or from a markdown checklist", function()
    local plan = ab.FixPlan.fromMarkdown("- [x] Reproduce\n- [ ] Fix\n", { maxAttempts = 1 })
    local status = plan:getStatus()
    assert.are.equal(2, #status.steps)
    assert.are.equal(1, status.currentStep)
    local warnings = {}
    plan:addListener(function(e) warnings[#warnings + 1] = e.message end)
    assert.are.same({ exit = true, reason = "plan_exhausted" }, plan:shouldExit("Still failing."))
    assert.are.same({ "Step 2 skipped after 1 attempts: Fix" }, warnings)
    expectCode("INVALID_ARGUMENT", ab.FixPlan.fromMarkdown, 42)
    expectCode("INVALID_CONFIG", ab.FixPlan.fromMarkdown, "- [ ] a", { steps = {} })
    expectCode("INVALID_CONFIG", ab.FixPlan.new, { steps = { { completed = false } } })
    local fromSteps = ab.FixPlan.new({ steps = { { description = "Fix it" } } })
    assert.are.same({ exit = true, reason = "plan_complete" }, fromSteps:shouldExit("Done."))
  end)

  it("Loop observes iterations and reports the decision", function()
    local l = ab.Loop.new({ maxIterations = 2 })
    local d = l:observe({ output = "Refactored the parser.", filesChanged = 2 })
    assert.are.equal("continue", d.action)
    assert.are.equal(1, d.iteration)
    assert.is_nil(d.reason)
    d = l:observe({ output = "Still working." })
    assert.are.same({ "exit", "max_iterations", "failure" }, { d.action, d.reason, d.outcome })
    expectCode("INVALID_ARGUMENT", l.observe, l, { output = "again" })
    l:reset()
    expectCode("INVALID_ARGUMENT", l.observe, l, { output = "x", events = { { type = "tool_use", name = "ls" } } })
    expectCode("INVALID_ARGUMENT", l.observe, l, { output = 42 })
    assert.are.equal(0, l:getStatus().iteration)
  end)

  it("configFromEnv reads a table of strings, or the process environment", function()
    local r = ab.configFromEnv({ AGENTBREAKER_TOOL_CAP = " 20 ", BB_CIRCUIT_BREAKER_IDLE_SECS = "abc" })
    assert.are.equal(20, r.config.maxToolCallsPerTask)
    assert.are.equal(300, r.config.maxIdleSecs)
    assert.are.equal("BB_CIRCUIT_BREAKER_IDLE_SECS", r.warnings[1].variable)
    local fromProcess = ab.configFromEnv()
    assert.is_table(fromProcess.config)
    assert.is_table(fromProcess.warnings)
    expectCode("INVALID_ARGUMENT", ab.configFromEnv, { AGENTBREAKER_TOOL_CAP = 20 })
    expectCode("INVALID_ARGUMENT", ab.configFromEnv, "AGENTBREAKER_TOOL_CAP=20")
  end)

  it("describe themselves with tostring", function()
    assert.are.equal("agentbreaker.CircuitBreaker(CLOSED, 0/5 failures)", tostring(quietBreaker()))
    assert.truthy(tostring(ab.BudgetBreaker.new()):find("BudgetBreaker", 1, true))
    assert.are.equal("agentbreaker.ExitStrategy(auto)", tostring(ab.ExitStrategy.new()))
    assert.are.equal("agentbreaker.Loop(iteration 0)", tostring(ab.Loop.new()))
  end)
end)

describe("Monitor", function()
  local function step(m, i, text, ok)
    m:observe({ type = "assistant", text = "Let me run the tests." })
    m:observe({ type = "tool_use", name = "Bash", id = "t" .. i, input = { command = "pytest -q" } })
    return m:observe({ type = "tool_result", id = "t" .. i, ok = ok or false, text = text or "1 failed" })
  end

  it("takes the contract's camelCase keys over a profile, with clock and listeners", function()
    local clock = ab.ManualClock.new(0)
    local m = ab.Monitor.new({ profile = "seed", toolLimits = { web_fetch = 2 }, warnBefore = 1,
      budgetWarnPercent = 50, stagnation = { repeatThreshold = 3 }, budget = { maxIdleSecs = 10 },
      failure = { failureThreshold = 9 }, clock = clock, listeners = { function() end } })
    local config = m:config()
    assert.are.equal("seed", config.profile)
    assert.are.equal(2, config.toolLimits.web_fetch)
    assert.are.equal(1, config.warnBefore)
    assert.are.equal(50, config.budgetWarnPercent)
    assert.are.equal(3, config.stagnation.repeatThreshold)
    assert.are.equal(9, config.failure.failureThreshold)
    assert.are.equal("coding-agent", ab.Monitor.new():config().profile)
    expectCode("INVALID_CONFIG", ab.Monitor.new, { profile = "fast" })
    expectCode("INVALID_CONFIG", ab.Monitor.new, { tool_limits = { x = 1 } })
    expectCode("INVALID_CONFIG", ab.Monitor.new, { stagnation = { repeatThreshold = -1 } })
    expectCode("INVALID_CONFIG", ab.Monitor.new, { clock = "now" })
    assert.are.equal("agentbreaker.Monitor(seed, 0 open tasks)", tostring(m))
  end)

  it("answers every event with a verdict: continue, a warning with a nudge, then a halt", function()
    local m = ab.Monitor.new({ profile = "seed", stagnation = { repeatThreshold = 4, noProgressThreshold = 100 } })
    local v = m:observe({ type = "tool_use", name = "Read" })
    assert.are.equal("continue", v.action)
    assert.are.equal("session", v.taskId)
    assert.is_nil(v.reason)
    assert.is_nil(v.nudge)
    local verdicts = {}
    for i = 1, 4 do
      v = step(m, i)
      verdicts[i] = v.action .. " " .. tostring(v.reason)
    end
    -- The ladder: a rule warns 2 (warnBefore) counts before its threshold, once, and halts at it.
    assert.are.same({ "continue nil", "warn repeated_step", "warn same_error", "halt repeated_step" }, verdicts)
    assert.truthy(m:status().tasks[1].halted)
    assert.are.equal(4, v.detail.count)
    assert.are.equal(4, v.detail.threshold)
    assert.truthy(v.message:find("pytest -q", 1, true))
    -- A halted task stays halted; reset forgets it.
    assert.are.equal("halt", m:observe({ type = "tool_use", name = "Read" }).action)
    m:reset()
    assert.are.equal("continue", m:observe({ type = "tool_use", name = "Read" }).action)
  end)

  it("refuses malformed events with INVALID_EVENT and changes nothing", function()
    local m = ab.Monitor.new()
    for _, bad in ipairs({ "tool_use", 42, {}, { type = 3 }, { type = "tool_use" }, { type = "tool_use", name = "" },
      { type = "tool_result", text = "no ok" }, { type = "heartbeat", phase = "starting" },
      { type = "tool_use", name = "Bash", input = { f = print } }, { type = "usage", costCents = -1 },
      { type = "progress", files = { 1 } }, { type = "alive", taskId = "" } }) do
      expectCode("INVALID_EVENT", m.observe, m, bad)
    end
    expectCode("INVALID_EVENT", m.observe, m)
    assert.are.same({}, m:status().tasks)
    -- An unknown type is ignored and counted, not refused.
    assert.are.equal("continue", m:observe({ type = "thinking", text = "..." }).action)
    assert.are.equal(1, m:status().ignoredEvents)
    -- An empty table under `files` is an empty list.
    m:observe({ type = "progress", files = {} })
  end)

  it("tells listeners of every warning and halt, and ticks the idle limit", function()
    local clock = ab.ManualClock.new(0)
    local seen = {}
    local m = ab.Monitor.new({ profile = "seed", budget = { maxIdleSecs = 10 }, clock = clock })
    local id = m:addListener(function(e) seen[#seen + 1] = e end)
    m:observe({ type = "heartbeat", taskId = "build", phase = "starting" })
    assert.are.same({}, m:tick())
    assert.are.equal("array", getmetatable(m:tick()).__jsontype)
    clock:set(8000)
    local verdicts = m:tick()
    assert.are.equal(1, #verdicts)
    assert.are.same({ "warn", "idle_timeout", "build" }, { verdicts[1].action, verdicts[1].reason, verdicts[1].taskId })
    clock:set(11000)
    verdicts = m:tick()
    assert.are.equal("halt", verdicts[1].action)
    assert.are.equal(2, #seen)
    assert.are.same({ "verdict", "warn", 8000 }, { seen[1].type, seen[1].action, seen[1].atMs })
    assert.are.same({ "verdict", "halt", "idle_timeout" }, { seen[2].type, seen[2].action, seen[2].reason })
    assert.is_true(m:removeListener(id))
    assert.are.equal(0, m:listenerErrors())
  end)

  it("snapshots and restores, through JSON text too, and goes on with the same verdicts", function()
    local clock = ab.ManualClock.new(1000)
    local config = { profile = "seed", stagnation = { repeatThreshold = 5, noProgressThreshold = 100 }, clock = clock }
    local m = ab.Monitor.new(config)
    m:observe({ type = "heartbeat", taskId = "t", phase = "starting" })
    for i = 1, 3 do
      step(m, i)
    end
    m:observe({ type = "progress", files = { "a.py" }, digest = "d1" })
    local snapshot = m:snapshot()
    assert.are.equal("monitor", snapshot.kind)
    assert.are.equal(1, snapshot.version)
    local hashes = 0
    for _, entry in ipairs(snapshot.tasks[1].history.steps) do
      assert.truthy(entry.signature:match("^%x+$") and #entry.signature == 16, entry.signature)
      hashes = hashes + 1
    end
    assert.truthy(hashes > 0)
    local text = json.encode(snapshot)
    for _, restored in ipairs({ snapshot, (json.decode(text, 1, ab.null)) }) do
      local other = ab.Monitor.new(config)
      other:restore(restored)
      assert.are.same(m:status(), other:status())
      assert.are.equal(text, json.encode(other:snapshot()))
      for i = 4, 9 do
        local a, b = step(m, i, "2 failed"), step(other, i, "2 failed")
        assert.are.same(a, b)
      end
      m:restore(restored)
    end
    local before = json.encode(m:snapshot())
    expectCode("INVALID_SNAPSHOT", m.restore, m, { kind = "failure", version = 1 })
    expectCode("INVALID_SNAPSHOT", m.restore, m, "snapshot")
    local wrongVersion = (json.decode(text, 1, ab.null))
    wrongVersion.version = 2
    expectCode("INVALID_SNAPSHOT", m.restore, m, wrongVersion)
    assert.are.equal(before, json.encode(m:snapshot()), "a refused snapshot changed nothing")
    -- A hand-written empty snapshot: its empty lists are taken as lists.
    m:restore({ version = 1, kind = "monitor", tasks = {}, stack = {}, ignoredEvents = 0 })
    assert.are.same({}, m:status().tasks)
  end)
end)
