'use strict'
// agentbreaker/openai-agents: a Monitor on an OpenAI Agents SDK run (`@openai/agents`).
//
//   const { agentBreaker } = require('agentbreaker/openai-agents')
//   const breaker = agentBreaker().attach(runner)            // a Runner (or an Agent)
//   try {
//     const result = await runner.run(agent, 'Fix the login test.', breaker.runOptions({ maxTurns: 30 }))
//   } catch (err) {
//     if (err.code === 'HALTED') console.log(err.verdict)     // an AgentHaltedError
//   }
//
// - attach(): the lifecycle events of a Runner or an Agent become Monitor events:
//   `agent_tool_start` a `tool_use` (and the usage of the model call that asked for it, from the
//   run context's cumulative usage), `agent_tool_end` a `tool_result`, `agent_end` the last usage
//   and the end of the run's task.
// - runOptions(): the options of one run: `signal` (aborted with the AgentHaltedError when the
//   Monitor halts the run: `run()` rejects with it; a streamed run ends with `cancelled`),
//   `callModelInputFilter` (the nudge of a warning goes to the model as a user message after
//   its input, on its next call; a filter of yours runs first) and `context` (which ties the
//   lifecycle events to the run). A signal of yours is combined with ours. A run started
//   without them is still watched; its halt is thrown from the hook, and the SDK rejects with
//   its ToolCallError (`err.error` is the AgentHaltedError); it gets no nudges.
// - Tool failures: the SDK hands the hooks only the text the model reads, by default the fixed
//   "An error occurred while running the tool. Please try again." (no error, no ok flag). That
//   text counts as a failed call; `breaker.errorFunction()` as a tool's `errorFunction` also
//   records the error itself (and wraps an errorFunction of yours, whose text the model reads).
//
// Nothing of `@openai/agents` is loaded: the adapter only reads what the SDK hands it.

const {
  AgentHaltedError,
  MAX_OPEN_RUNS,
  Watcher,
  errorText,
  invalidArgument,
  makeMonitor,
  needFramework,
  newTaskId,
  toText,
  usageEvent,
} = require('./_common.js')

needFramework('openai-agents', '@openai/agents', 'the OpenAI Agents SDK')

/** The SDK's text for a tool that threw (defaultToolErrorFunction). */
const SDK_TOOL_ERROR = 'An error occurred while running the tool. Please try again.'

/** A call's arguments (a JSON string in the SDK) as the value they encode. */
function parseArguments(args) {
  if (typeof args !== 'string') return args ?? {}
  if (args === '') return {}
  try {
    return JSON.parse(args)
  } catch {
    return args
  }
}

/** The model's name when the agent names it (the Monitor's price table is by name). */
function modelName(agent) {
  const model = agent && agent.model
  if (typeof model === 'string') return model
  if (model && typeof model.model === 'string') return model.model
  return null
}

function cachedTokens(details) {
  let total = 0
  for (const entry of Array.isArray(details) ? details : details ? [details] : []) {
    if (entry && typeof entry.cached_tokens === 'number') total += entry.cached_tokens
  }
  return total
}

/** The figures of the SDK's `Usage` (cumulative over the run). */
function usageFigures(usage) {
  if (!usage || typeof usage !== 'object') return { input: 0, output: 0, cached: 0 }
  return {
    input: Number(usage.inputTokens) || 0,
    output: Number(usage.outputTokens) || 0,
    cached: cachedTokens(usage.inputTokensDetails),
  }
}

class AgentBreaker {
  constructor(options = {}) {
    if (options === null || typeof options !== 'object') {
      throw invalidArgument('agentBreaker() takes an options object')
    }
    const watcher = new Watcher(makeMonitor(options))
    Object.defineProperty(this, '_state', {
      value: {
        watcher,
        fixedTask: typeof options.taskId === 'string' && options.taskId ? options.taskId : null,
        // run records by their key: the run's context object (or the RunContext of a run not
        // started with runOptions())
        runs: new Map(),
        // errors our errorFunction saw, by call id
        failed: new Map(),
        attached: [],
      },
    })
  }

  /** The Monitor. */
  get monitor() {
    return this._state.watcher.monitor
  }

  /** The latest warn or halt verdict of any run (null before the first). */
  get verdict() {
    return this._state.watcher.lastVerdict
  }

  /** The verdict that halted the latest halted run (null if none was). */
  get halt() {
    return this._state.watcher.lastHalt
  }

  /** The record of a run, made on first sight (`key`: the run's context, else its RunContext). */
  _record(key) {
    const runs = this._state.runs
    let record = runs.get(key)
    if (record === undefined) {
      const fixed = this._state.fixedTask
      // a new run starts from zero, also under a fixed task id (one before it may have ended by
      // an exception, or halted, without closing it)
      if (fixed) this._state.watcher.close(fixed)
      record = {
        run: this._state.watcher.run(fixed || newTaskId('openai-agents')),
        controller: null,
        seen: { input: 0, output: 0, cached: 0 },
      }
      runs.set(key, record)
      while (runs.size > MAX_OPEN_RUNS) runs.delete(runs.keys().next().value)
    }
    return record
  }

  _recordOf(runContext) {
    const context = runContext && runContext.context
    const key = context !== null && context !== undefined && this._state.runs.has(context) ? context : runContext
    return this._record(key)
  }

  _observe(record, event) {
    const verdict = this._state.watcher.observe(record.run, event)
    if (verdict.action === 'halt') {
      if (record.controller === null) {
        // a run not started with runOptions(): no signal to abort. An error thrown by a hook
        // ends the run: it rejects with the SDK's ToolCallError, whose `error` is ours.
        throw new AgentHaltedError(verdict)
      }
      if (!record.controller.signal.aborted) record.controller.abort(new AgentHaltedError(verdict))
    }
    return verdict
  }

  /** The usage of the model calls since the last look (the run context's usage is cumulative). */
  _usage(record, runContext, agent) {
    const now = usageFigures(runContext && runContext.usage)
    const seen = record.seen
    const input = now.input - seen.input
    const output = now.output - seen.output
    const cached = now.cached - seen.cached
    record.seen = now
    const event = usageEvent(input - cached, output, cached, 0, modelName(agent))
    if (event !== null) this._observe(record, event)
  }

  _toolStart(runContext, agent, tool, details) {
    const record = this._recordOf(runContext)
    this._usage(record, runContext, agent)
    const call = (details && details.toolCall) || {}
    const event = {
      type: 'tool_use',
      name: call.name || (tool && tool.name) || '?',
      input: parseArguments(call.arguments ?? call.input ?? call.action),
    }
    if (call.callId) event.id = call.callId
    this._observe(record, event)
  }

  _toolEnd(runContext, agent, tool, result, details) {
    const record = this._recordOf(runContext)
    const call = (details && details.toolCall) || {}
    const failed = this._state.failed
    const error = call.callId ? failed.get(call.callId) : undefined
    if (error !== undefined) failed.delete(call.callId)
    const text = toText(result)
    const ok = error === undefined && text !== SDK_TOOL_ERROR
    const event = { type: 'tool_result', ok, text: error ?? text, name: call.name || (tool && tool.name) || '?' }
    if (call.callId) event.id = call.callId
    this._observe(record, event)
  }

  _agentEnd(runContext, agent) {
    const record = this._recordOf(runContext)
    this._usage(record, runContext, agent)
    if (record.run.halt === null) {
      // the run is over: its task is closed (a halted run keeps its task until it is evicted,
      // so that calls still finishing count for the halted task)
      for (const [key, value] of this._state.runs) {
        if (value === record) this._state.runs.delete(key)
      }
      this._state.watcher.close(record.run.task)
    }
  }

  /**
   * Listens to the lifecycle events of a Runner (`runner.on(...)`, every run of the runner) or
   * of an Agent (`agent.on(...)`, the runs in which it is active). Returns the breaker.
   */
  attach(target) {
    if (!target || typeof target.on !== 'function' || typeof target.off !== 'function') {
      throw invalidArgument('attach() takes a Runner or an Agent of @openai/agents')
    }
    // A Runner's events carry the agent, an Agent's do not (it is the agent).
    const isRunner = typeof target.run === 'function'
    const listeners = isRunner
      ? {
          agent_tool_start: (ctx, agent, tool, details) => this._toolStart(ctx, agent, tool, details),
          agent_tool_end: (ctx, agent, tool, result, details) => this._toolEnd(ctx, agent, tool, result, details),
          agent_end: (ctx, agent) => this._agentEnd(ctx, agent),
        }
      : {
          agent_tool_start: (ctx, tool, details) => this._toolStart(ctx, target, tool, details),
          agent_tool_end: (ctx, tool, result, details) => this._toolEnd(ctx, target, tool, result, details),
          agent_end: (ctx) => this._agentEnd(ctx, target),
        }
    for (const [name, listener] of Object.entries(listeners)) target.on(name, listener)
    this._state.attached.push({ target, listeners })
    return this
  }

  /** Stops listening to `target` (every target when none is given). */
  detach(target) {
    const attached = this._state.attached
    for (let i = attached.length - 1; i >= 0; i--) {
      if (target !== undefined && attached[i].target !== target) continue
      for (const [name, listener] of Object.entries(attached[i].listeners)) attached[i].target.off(name, listener)
      attached.splice(i, 1)
    }
    return this
  }

  /**
   * The options of one run (`runner.run(agent, input, breaker.runOptions({...yours}))`): yours,
   * with `signal`, `callModelInputFilter` and `context` added (see the file's head).
   */
  runOptions(options = {}) {
    if (options === null || typeof options !== 'object') throw invalidArgument('runOptions() takes an options object')
    const context = options.context !== undefined && options.context !== null ? options.context : {}
    // a context object used by an earlier run starts a new run
    this._state.runs.delete(context)
    let record = this._record(context)
    record.controller = new AbortController()
    const signals = [record.controller.signal]
    if (options.signal) signals.push(options.signal)
    const userFilter = options.callModelInputFilter
    const watcher = this._state.watcher
    const runs = this._state.runs
    const callModelInputFilter = async (args) => {
      // A run resumed from its RunState (after an approval) keeps the context of the run it
      // resumes, so its events go to that run's record: this run's signal and nudges go there
      // too, and a halt found before the resume stops it now.
      const live = args.context !== undefined && args.context !== null ? runs.get(args.context) : undefined
      if (live !== undefined && live !== record) {
        if (runs.get(context) === record) runs.delete(context)
        live.controller = record.controller
        record = live
        if (record.run.halt !== null && !record.controller.signal.aborted) {
          record.controller.abort(new AgentHaltedError(record.run.halt))
        }
      }
      let modelData = args.modelData
      if (typeof userFilter === 'function') modelData = await userFilter(args)
      const nudges = watcher.takeNudges(record.run)
      if (nudges.length === 0) return modelData
      return { ...modelData, input: [...modelData.input, { role: 'user', content: nudges.join('\n\n') }] }
    }
    if (userFilter && userFilter.preserveInputIdentity) callModelInputFilter.preserveInputIdentity = true
    return {
      ...options,
      context,
      signal: signals.length === 1 ? signals[0] : AbortSignal.any(signals),
      callModelInputFilter,
    }
  }

  /**
   * A tool's `errorFunction` that records the error of a failed call (the Monitor compares
   * failures by their text), then answers with `mine(context, error, details)` if given, else the
   * SDK's default text.
   */
  errorFunction(mine) {
    if (mine !== undefined && mine !== null && typeof mine !== 'function') {
      throw invalidArgument('errorFunction() takes a function or nothing')
    }
    const failed = this._state.failed
    return async (context, error, details) => {
      const callId = details && details.toolCall && details.toolCall.callId
      if (callId) {
        failed.set(callId, errorText(error))
        while (failed.size > MAX_OPEN_RUNS) failed.delete(failed.keys().next().value)
      }
      return typeof mine === 'function' ? mine(context, error, details) : SDK_TOOL_ERROR
    }
  }
}

/** A breaker for OpenAI Agents SDK runs (see the file's head). */
function agentBreaker(options) {
  return new AgentBreaker(options)
}

module.exports = { AgentBreaker, SDK_TOOL_ERROR, agentBreaker }
