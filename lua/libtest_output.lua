-- A busted output handler that prints one libtest-style line per test, as the Rust runner does
-- (`test failure/opens_at_fifth_failure ... ok`), then the failures and a summary. The test name
-- is the `it()` name alone (for the conformance runner: the scenario's path), so
-- tools/mutate_scenarios.py can read the results: `busted -o lua/libtest_output.lua`.

return function()
  local busted = require("busted")
  local handler = require("busted.outputHandlers.base")()
  local problems = {}

  local function line(text)
    io.write(text, "\n")
    io.flush()
  end

  local function describeProblem(t)
    local message = t.message
    if type(message) ~= "string" then
      message = require("pl.pretty").write(message)
    end
    return message
  end

  handler.testEnd = function(element, _, status)
    local name = element.name
    if status == "success" then
      line(("test %s ... ok"):format(name))
    elseif status == "pending" then
      line(("test %s ... ignored"):format(name))
    else
      local list = status == "failure" and handler.failures or handler.errors
      problems[#problems + 1] = { name = name, message = describeProblem(list[#list]) }
      line(("test %s ... FAILED"):format(name))
    end
    return nil, true
  end

  handler.error = function(element, _, message)
    if element.descriptor ~= "it" then
      problems[#problems + 1] = { name = element.name or "(file)", message = tostring(message) }
      line(("error %s ... FAILED"):format(element.name or "(file)"))
    end
    return nil, true
  end

  handler.suiteEnd = function()
    if #problems > 0 then
      line("\nfailures:")
      for _, p in ipairs(problems) do
        line(("\n---- %s ----\n%s"):format(p.name, p.message))
      end
    end
    local passed, failed = #handler.successes, #handler.failures + #handler.errors
    line(("\ntest result: %s. %d passed; %d failed; %d ignored (%s)"):format(
      failed == 0 and "ok" or "FAILED", passed, failed, #handler.pendings,
      jit and jit.version or _VERSION))
    return nil, true
  end

  busted.subscribe({ "test", "end" }, handler.testEnd, { predicate = handler.cancelOnPending })
  busted.subscribe({ "error" }, handler.error)
  busted.subscribe({ "suite", "end" }, handler.suiteEnd)

  return handler
end
