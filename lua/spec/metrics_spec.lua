-- The metrics vocabulary from Lua (docs/observability.md): monitor:setMetricsRecorder(fn, {task =
-- true}), ab.metricDefinitions() and ab.metricUpdates(event, breaker, {task = true}), read back as
-- exact counts for a scripted stuck session (one warning, one halt, reason repeated_step) and a
-- healthy one (none).

local ab = require("agentbreaker")

local function codeOf(err)
  return type(err) == "string" and err:match("^([A-Z][A-Z_]*): ") or nil
end

-- Adds updates up as a registry would: counters by name and attributes, histogram values.
local function registry()
  local kinds = {}
  for _, d in ipairs(ab.metricDefinitions()) do
    kinds[d.name] = d.instrument
  end
  local counters, observed = {}, {}
  local function series(name, attributes)
    local keys = {}
    for k, v in pairs(attributes or {}) do
      keys[#keys + 1] = k .. "=" .. v
    end
    table.sort(keys)
    return name .. "{" .. table.concat(keys, ",") .. "}"
  end
  local r = {}
  function r.record(updates)
    for _, u in ipairs(updates) do
      local name, value, attributes = u[1], u[2], u[3]
      local s = series(name, attributes)
      if kinds[name] == "histogram" then
        observed[s] = observed[s] or {}
        table.insert(observed[s], value)
      else
        counters[s] = (counters[s] or 0) + value
      end
    end
  end
  function r.counter(name, attributes)
    return counters[series(name, attributes)] or 0
  end
  function r.total(name)
    local sum = 0
    for s, v in pairs(counters) do
      if s:sub(1, #name + 1) == name .. "{" then
        sum = sum + v
      end
    end
    return sum
  end
  function r.histogram(name, attributes)
    return observed[series(name, attributes)] or {}
  end
  return r
end

local function step(i, command)
  return {
    { type = "assistant", text = "Let me look." },
    { type = "tool_use", name = "Bash", id = "t" .. i, input = { command = command } },
    { type = "tool_result", id = "t" .. i, ok = true, text = "the same output" },
  }
end

describe("metrics (" .. (jit and jit.version or _VERSION) .. ")", function()
  it("a stuck session records one warning and one halt (repeated_step)", function()
    local monitor = ab.Monitor.new({ stagnation = { repeatThreshold = 4 }, warnBefore = 1,
      clock = ab.ManualClock.new(0) })
    local r = registry()
    monitor:setMetricsRecorder(r.record)
    local warns, halts = 0, 0
    for i = 1, 6 do
      for _, e in ipairs(step(i, "ls")) do
        local action = monitor:observe(e).action
        warns = warns + (action == "warn" and 1 or 0)
        halts = halts + (action == "halt" and 1 or 0)
      end
    end
    monitor:observe({ type = "usage", costCents = 2.5 })
    assert.are.equal(1, warns)
    assert.is_true(halts > 1, "the halt repeats")
    assert.are.equal(1, r.counter("agentbreaker.warnings", { reason = "repeated_step" }))
    assert.are.equal(1, r.total("agentbreaker.warnings"))
    assert.are.equal(1, r.counter("agentbreaker.halts", { reason = "repeated_step" }))
    assert.are.equal(1, r.total("agentbreaker.halts"))
    assert.are.equal(4, r.total("agentbreaker.tool_calls"))
    assert.are.equal(0, r.total("agentbreaker.spend"))
    assert.are.same({ 4 }, r.histogram("agentbreaker.task.steps", { outcome = "halted" }))
  end)

  it("a healthy session records no warning and no halt; {task = true} adds the task", function()
    local monitor = ab.Monitor.new({ clock = ab.ManualClock.new(0) })
    local r = registry()
    monitor:setMetricsRecorder(r.record, { task = true })
    monitor:observe({ type = "heartbeat", taskId = "fix", phase = "starting" })
    for i, file in ipairs({ "alpha", "bravo", "charlie", "delta", "echo", "foxtrot" }) do
      for _, e in ipairs(step(i, "cat " .. file .. ".py")) do
        assert.are.equal("continue", monitor:observe(e).action)
      end
      monitor:observe({ type = "progress", files = 1 })
    end
    monitor:observe({ type = "usage", costCents = 2.5 })
    monitor:observe({ type = "usage", model = "claude-sonnet-4",
      usage = { input_tokens = 1000, output_tokens = 100 } })
    monitor:observe({ type = "heartbeat", taskId = "fix", phase = "done" })
    assert.are.equal(0, r.total("agentbreaker.warnings"))
    assert.are.equal(0, r.total("agentbreaker.halts"))
    assert.are.equal(6, r.counter("agentbreaker.tool_calls", { task = "fix" }))
    assert.is_true(r.counter("agentbreaker.spend", { task = "fix" }) > 2.5)
    assert.are.same({ 6 }, r.histogram("agentbreaker.task.steps", { outcome = "done" }))
  end)

  it("a recorder can be removed and replaced; what it raises is dropped", function()
    local monitor = ab.Monitor.new()
    local seen = {}
    monitor:setMetricsRecorder(function(updates)
      for _, u in ipairs(updates) do
        seen[#seen + 1] = u
      end
    end)
    monitor:observe({ type = "tool_use", name = "x" })
    assert.are.equal(1, #seen)
    assert.are.equal("agentbreaker.tool_calls", seen[1][1])
    assert.are.equal(1, seen[1][2])
    assert.is_nil(next(seen[1][3]))
    monitor:setMetricsRecorder(nil)
    monitor:observe({ type = "tool_use", name = "x" })
    assert.are.equal(1, #seen)
    monitor:setMetricsRecorder(function() error("a broken exporter") end)
    assert.are.equal("continue", monitor:observe({ type = "tool_use", name = "x" }).action)
    for _, bad in ipairs({
      function() monitor:setMetricsRecorder(42) end,
      function() monitor:setMetricsRecorder(print, { task = "yes" }) end,
      function() monitor:setMetricsRecorder(print, 7) end,
    }) do
      local ok, err = pcall(bad)
      assert.is_false(ok)
      assert.are.equal("INVALID_ARGUMENT", codeOf(err), err)
    end
  end)

  it("metricDefinitions() is the core vocabulary", function()
    local names = {}
    local definitions = ab.metricDefinitions()
    for _, d in ipairs(definitions) do
      names[#names + 1] = d.name
    end
    assert.are.same({ "agentbreaker.halts", "agentbreaker.warnings", "agentbreaker.state_changes",
      "agentbreaker.tool_calls", "agentbreaker.spend", "agentbreaker.task.steps" }, names)
    assert.are.equal("agentbreaker_halts_total", definitions[1].prometheusName)
    assert.are.equal("counter", definitions[1].instrument)
    assert.are.equal("{halt}", definitions[1].unit)
    assert.are.same({ "reason", "task" }, definitions[1].attributes)
    assert.are.same({ 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000 }, definitions[6].buckets)
  end)

  it("metricUpdates() maps a listener event through the core's function", function()
    local updates = {}
    local breaker = ab.FailureBreaker.new({ failureThreshold = 2, quiet = true, clock = ab.ManualClock.new(0) })
    breaker:addListener(function(event)
      for _, u in ipairs(ab.metricUpdates(event, "failure")) do
        updates[#updates + 1] = u
      end
    end)
    breaker:recordFailure("x")
    breaker:recordFailure("x")
    assert.are.equal(1, #updates)
    assert.are.equal("agentbreaker.state_changes", updates[1][1])
    assert.are.same({ breaker = "failure", from = "CLOSED", to = "OPEN" }, updates[1][3])
    local halt = { type = "verdict", action = "halt", reason = "repeated_step", taskId = "t1", step = 4, atMs = 0 }
    local got = ab.metricUpdates(halt, "monitor", { task = true })
    assert.are.equal(2, #got)
    assert.are.equal("agentbreaker.halts", got[1][1])
    assert.are.same({ reason = "repeated_step", task = "t1" }, got[1][3])
    assert.are.equal("agentbreaker.task.steps", got[2][1])
    assert.are.equal(4, got[2][2])
    assert.are.same({ outcome = "halted" }, got[2][3])
    assert.are.equal(0, #ab.metricUpdates({ type = "verdict", action = "continue" }, "monitor"))
    local ok, err = pcall(ab.metricUpdates, halt)
    assert.is_false(ok)
    assert.are.equal("INVALID_ARGUMENT", codeOf(err), err)
    ok, err = pcall(ab.metricUpdates, print, "monitor")
    assert.is_false(ok)
    assert.are.equal("INVALID_EVENT", codeOf(err), err)
  end)
end)
