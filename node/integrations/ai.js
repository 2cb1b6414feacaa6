'use strict'
// agentbreaker/ai: a Monitor on the Vercel AI SDK's agent loop (`ai` 5, 6 and 7).
//
//   const { agentBreaker } = require('agentbreaker/ai')
//   const guard = agentBreaker()
//   const result = await generateText({ model, tools, prompt, ...guard })
//   guard.verdict   // null, or the run's last warn/halt verdict (a halted run ends with its halt)
//
// The guard is four option values to spread into generateText, streamText or new ToolLoopAgent:
// - onStepEnd (v7) and onStepFinish (v5, v6; the same function: v7 calls only onStepEnd when
//   both are given): each finished step becomes Monitor events (`assistant` with the step's text,
//   `usage`, a `tool_use` per tool call, a `tool_result` per result or tool error, in order);
// - prepareStep: after a warning, the nudge goes to the model as a user message after the step's
//   messages (that step only: the SDK keeps no edits of prepareStep);
// - stopWhen: a StopCondition that is true once the Monitor halted the run (and at maxSteps,
//   or when one of your own conditions is).
// The SDK evaluates stopWhen after a step whose tools ran, so the tools of the halting step have
// run; the result is the SDK's usual one (finishReason of the last step). With
// `onHalt: 'throw'`, stopWhen throws the AgentHaltedError instead: generateText rejects with it,
// a stream's iteration throws it (and its `steps` promise rejects). (The SDK swallows what an
// onStepFinish callback throws, and a stopWhen that is true wins over an aborted signal, so the
// condition itself throws.)
//
// Runs: one guard serves any number of runs, one after another or at once (each generateText or
// streamText call, each agent.generate() or agent.stream() of a ToolLoopAgent built with it).
// Each run is a task of its own in the Monitor, with its own nudges and halt. The SDK hands
// prepareStep and stopWhen the run's `steps` array (one array per run): a prepareStep with an
// array the guard has not seen, empty, starts a new run. onStepEnd gets only the step: it is the
// last of its run's array (generateText), or its response messages begin with those of the
// run's previous step (streamText), or it is the one run of the guard at that step number; for
// two streams at once both in their first step, the step is fed once the SDK has put it in its
// run's array (before that run's stopWhen and next prepareStep, or on the next turn of the event
// loop), after your onStepEnd. The getters (taskId, verdict, halt, halted) are the latest run's;
// runOf(result.steps) is any run's. A run's task stays open until the guard's next run starts
// after it ended (a step without tool calls, or stopWhen true), or reset().
//
// A tool input the Monitor refuses (a BigInt from a schema transform, a cycle, ...) is given
// again as a JSON-safe copy (_common.js Watcher.observe); the guard never breaks a step.
//
// Nothing of `ai` is loaded: the adapter only reads what the SDK hands it.

const {
  AgentHaltedError,
  MAX_OPEN_RUNS,
  Run,
  Watcher,
  callMaybe,
  errorText,
  invalidArgument,
  makeMonitor,
  needFramework,
  newTaskId,
  toText,
  usageEvent,
} = require('./_common.js')

needFramework('ai', 'ai', 'the Vercel AI SDK')

/** The default step limit: ToolLoopAgent's (generateText's own default is one step). */
const DEFAULT_MAX_STEPS = 20

function number(value) {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0
}

/** A `usage` event from a step's usage (v6/v7 `inputTokenDetails`, or v5's flat counts). */
function stepUsage(step) {
  const usage = step.usage
  if (!usage || typeof usage !== 'object') return null
  const details = usage.inputTokenDetails || {}
  const cacheRead = number(details.cacheReadTokens ?? usage.cachedInputTokens)
  const cacheWrite = number(details.cacheWriteTokens)
  const input =
    typeof details.noCacheTokens === 'number' ? details.noCacheTokens : number(usage.inputTokens) - cacheRead - cacheWrite
  const model = (step.response && step.response.modelId) || (step.model && step.model.modelId) || null
  return usageEvent(input, number(usage.outputTokens), cacheRead, cacheWrite, model)
}

/** The Monitor events of one finished step, in order. */
function stepEvents(step) {
  const events = [{ type: 'assistant', text: typeof step.text === 'string' ? step.text : '' }]
  const usage = stepUsage(step)
  if (usage !== null) events.push(usage)
  for (const call of step.toolCalls || []) {
    const event = { type: 'tool_use', name: call.toolName || '?', input: call.input ?? null }
    if (call.toolCallId) event.id = call.toolCallId
    events.push(event)
  }
  const content = Array.isArray(step.content) ? step.content : []
  let results = content.filter((part) => part && (part.type === 'tool-result' || part.type === 'tool-error'))
  if (results.length === 0 && Array.isArray(step.toolResults)) {
    results = step.toolResults.map((r) => ({ ...r, type: 'tool-result' }))
  }
  for (const part of results) {
    const ok = part.type === 'tool-result'
    const event = {
      type: 'tool_result',
      ok,
      text: ok ? toText(part.output) : errorText(part.error),
      name: part.toolName || '?',
    }
    if (part.toolCallId) event.id = part.toolCallId
    events.push(event)
  }
  return events
}

/** One run of the guard (one generateText/streamText call, one agent.generate()/stream()). */
class RunRecord {
  constructor(run) {
    /** The Watcher's run: its task, halt, nudges. */
    this.run = run
    /** The run's `steps` array, as prepareStep and stopWhen get it (null until seen). */
    this.steps = null
    /** Steps fed to the Monitor, and the last of them. */
    this.fed = 0
    this.last = null
    /** prepareStep began a step that onStepEnd has not fed yet. */
    this.inStep = false
    this.started = false
    /** The SDK ended the run (a step without tool calls, or stopWhen true). */
    this.ended = false
  }
}

function hasToolCalls(step) {
  return Boolean(step) && Array.isArray(step.toolCalls) && step.toolCalls.length > 0
}

/** What `runOf()` answers about one run. */
function runView(record) {
  const run = record.run
  return { taskId: run.task, verdict: run.latest, halt: run.halt, halted: run.halt !== null }
}

class AgentBreaker {
  constructor(options = {}) {
    if (options === null || typeof options !== 'object') {
      throw invalidArgument('agentBreaker() takes an options object')
    }
    const {
      taskId,
      onHalt = 'stop',
      maxSteps = DEFAULT_MAX_STEPS,
      stopWhen: userStop,
      prepareStep: userPrepare,
      onStepEnd: userStepEnd,
      onStepFinish: userStepFinish,
    } = options
    if (onHalt !== 'stop' && onHalt !== 'throw') throw invalidArgument(`onHalt must be 'stop' or 'throw', not ${onHalt}`)
    if (maxSteps !== null && maxSteps !== Infinity && !(Number.isInteger(maxSteps) && maxSteps >= 1)) {
      throw invalidArgument('maxSteps must be a whole number >= 1, Infinity or null')
    }
    const conditions = userStop === undefined || userStop === null ? [] : [].concat(userStop)
    for (const c of conditions) {
      if (typeof c !== 'function') throw invalidArgument('stopWhen must be a StopCondition or an array of them')
    }
    const userStepCallback = userStepEnd ?? userStepFinish
    const watcher = new Watcher(makeMonitor(options))
    const fixedTask = typeof taskId === 'string' && taskId ? taskId : null
    const newRecord = () => new RunRecord(new Run(fixedTask || newTaskId('ai')))
    const state = {
      watcher,
      fixedTask,
      newRecord,
      /** The latest run (before the first: the record the first run takes, with its task id). */
      latest: newRecord(),
      /** The runs whose task is open, oldest first. */
      open: new Set(),
      /** Runs by their `steps` array, and by each step fed. */
      byArray: new WeakMap(),
      byStep: new WeakMap(),
      /** Finished steps whose run was not certain when they finished (two streams at once). */
      deferred: [],
    }
    Object.defineProperty(this, '_state', { value: state })

    const closeRecord = (record) => {
      state.open.delete(record)
      if (watcher.runs.get(record.run.task) === record.run) watcher.close(record.run.task)
    }

    /** A new run: its own task (a fixed taskId starts from zero), its own nudges and halt. */
    const startRun = (steps) => {
      // the runs known to have ended are over: their tasks are closed
      for (const record of state.open) if (record.ended && !record.inStep) closeRecord(record)
      const record = state.latest.started ? newRecord() : state.latest
      if (fixedTask) watcher.close(fixedTask)
      record.run = watcher.run(record.run.task)
      record.started = true
      state.open.add(record)
      while (state.open.size > MAX_OPEN_RUNS) closeRecord(state.open.values().next().value)
      state.latest = record
      bind(record, steps)
      return record
    }

    const bind = (record, steps) => {
      if (!Array.isArray(steps) || record.steps === steps) return
      record.steps = steps
      state.byArray.set(steps, record)
    }

    /** The run a `steps` array belongs to: by the array, else by its last step (null: unknown). */
    const recordOf = (steps) => {
      if (!Array.isArray(steps)) return null
      let record = state.byArray.get(steps)
      if (record === undefined && steps.length > 0) {
        const last = steps[steps.length - 1]
        record = last !== null && typeof last === 'object' ? state.byStep.get(last) : undefined
        if (record !== undefined) bind(record, steps)
      }
      return record === undefined ? null : record
    }

    const feed = (record, step) => {
      if (step !== null && typeof step === 'object') {
        if (state.byStep.has(step)) return
        state.byStep.set(step, record)
      }
      record.inStep = false
      record.fed += 1
      record.last = step
      for (const event of stepEvents(step)) watcher.observe(record.run, event)
      // the SDK ends a run at a step without tool calls (stopWhen says otherwise if it goes on)
      if (!hasToolCalls(step)) record.ended = true
    }

    /** Feeds the deferred steps that are in `steps` (the run's array), in their order. */
    const feedDeferred = (record, steps) => {
      if (state.deferred.length === 0 || !Array.isArray(steps)) return
      const mine = state.deferred.filter((step) => steps.includes(step))
      if (mine.length === 0) return
      state.deferred = state.deferred.filter((step) => !mine.includes(step))
      mine.sort((a, b) => steps.indexOf(a) - steps.indexOf(b))
      for (const step of mine) feed(record, step)
    }

    /** After the SDK recorded a deferred step in its run's steps (if not fed by then): the run is certain. */
    const settleDeferred = (step) => {
      const at = state.deferred.indexOf(step)
      if (at < 0) return
      state.deferred.splice(at, 1)
      let record = null
      for (const r of state.open) {
        if (r.steps !== null && r.steps.includes(step)) record = r
      }
      feed(record || guess(step) || state.latest, step)
    }

    /** The runs between prepareStep and onStepEnd, narrowed to the step's number when it has one. */
    const guess = (step) => {
      const busy = [...state.open].filter((r) => r.inStep)
      const n = step && step.stepNumber
      const same = typeof n === 'number' ? busy.filter((r) => r.fed === n) : busy
      return same.length > 0 ? same[0] : null
    }

    /** The run a finished step belongs to; undefined when that is not certain yet. */
    const identify = (step) => {
      const busy = [...state.open].filter((r) => r.inStep)
      // generateText: the step is already the last of its run's steps
      for (const r of busy) if (r.steps !== null && r.steps[r.steps.length - 1] === step) return r
      // streamText: a step's response messages begin with those of the run's earlier steps
      const messages = step && step.response && step.response.messages
      const first = Array.isArray(messages) ? messages[0] : undefined
      if (first !== null && typeof first === 'object') {
        for (const r of busy) {
          const earlier = r.last && r.last.response && r.last.response.messages
          if (Array.isArray(earlier) && earlier[0] === first) return r
        }
      }
      // the one run of the guard at this step
      const n = step && step.stepNumber
      const same = typeof n === 'number' ? busy.filter((r) => r.fed === n) : busy
      if (same.length === 1) return same[0]
      if (busy.length === 0) {
        // no prepareStep of the guard began it (yours replaced it): a first step is a new run
        return n === 0 || !state.latest.started ? startRun(null) : state.latest
      }
      return undefined
    }

    const onStep = async (step) => {
      let deferred = false
      try {
        const record = identify(step)
        if (record === undefined) {
          state.deferred.push(step)
          deferred = true
        } else {
          feed(record, step)
        }
      } finally {
        await callMaybe(userStepCallback, step)
        // the SDK records the step in its run's steps right after this callback returns
        if (deferred) setImmediate(settleDeferred, step)
      }
    }
    const limit = maxSteps === null ? Infinity : maxSteps

    /**
     * A StopCondition: the Monitor halted the run (with onHalt 'throw': throws the
     * AgentHaltedError), maxSteps is reached, or one of yours is true.
     */
    this.stopWhen = async (arg) => {
      const steps = arg && Array.isArray(arg.steps) ? arg.steps : []
      const record = recordOf(arg && arg.steps) || state.latest
      feedDeferred(record, steps)
      if (record.run.halt !== null) {
        record.ended = true
        if (onHalt === 'throw') throw new AgentHaltedError(record.run.halt)
        return true
      }
      let stop = steps.length >= limit
      for (const condition of conditions) {
        if (stop) break
        if (await condition(arg)) stop = true
      }
      record.ended = stop
      return stop
    }
    /** Adds the nudges of the run's warnings since its last step to this step's messages. */
    this.prepareStep = async (arg) => {
      const steps = arg && arg.steps
      let record = recordOf(steps)
      if (record === null) {
        // a run whose first step starts is a new run
        record = Array.isArray(steps) && steps.length > 0 && state.latest.started ? state.latest : startRun(steps)
        bind(record, steps)
      }
      feedDeferred(record, steps)
      record.inStep = true
      record.ended = false
      const result = await callMaybe(userPrepare, arg)
      const nudges = watcher.takeNudges(record.run)
      if (nudges.length === 0) return result
      const base = (result && result.messages) || (arg && arg.messages) || []
      return { ...(result || {}), messages: [...base, { role: 'user', content: nudges.join('\n\n') }] }
    }
    this.onStepEnd = onStep
    this.onStepFinish = onStep
  }

  /** The Monitor. */
  get monitor() {
    return this._state.watcher.monitor
  }

  /** The latest run's task id in the Monitor (before the first run: the id it will have). */
  get taskId() {
    return this._state.latest.run.task
  }

  /** The latest run's last warn or halt verdict (null while it is healthy); a halted run ends with its halt. */
  get verdict() {
    return this._state.latest.run.latest
  }

  /** The latest run's halt verdict, once the Monitor halted it (else null). */
  get halt() {
    return this._state.latest.run.halt
  }

  /** The latest run was halted. */
  get halted() {
    return this._state.latest.run.halt !== null
  }

  /** Events the Monitor refused even as their JSON-safe copy: not watched (a warning the first time). */
  get observeErrors() {
    return this._state.watcher.observeErrors
  }

  /**
   * The run whose steps these are (`result.steps`, or `await stream.steps`): its task id, last
   * verdict and halt; null for steps of no run of this guard.
   */
  runOf(steps) {
    const state = this._state
    if (!Array.isArray(steps)) return null
    let record = state.byArray.get(steps)
    if (record === undefined && steps.length > 0) {
      const last = steps[steps.length - 1]
      record = last !== null && typeof last === 'object' ? state.byStep.get(last) : undefined
    }
    return record === undefined ? null : runView(record)
  }

  /** Closes the task of every run of the guard: the next run starts from zero with a new task id. */
  reset() {
    const state = this._state
    for (const record of state.open) {
      if (state.watcher.runs.get(record.run.task) === record.run) state.watcher.close(record.run.task)
    }
    state.open.clear()
    state.deferred = []
    state.latest = state.newRecord()
  }
}

/** The guard to spread into generateText, streamText or new ToolLoopAgent (see the file's head). */
function agentBreaker(options) {
  return new AgentBreaker(options)
}

/**
 * A StopCondition that is true once `monitor` has halted a task (`taskId`, or any): for agents
 * that feed the Monitor themselves.
 */
function breakerStopWhen(monitor, options = {}) {
  const taskId = options && options.taskId
  if (!monitor || typeof monitor.status !== 'function') {
    throw invalidArgument('breakerStopWhen() takes an agentbreaker Monitor')
  }
  return () => monitor.status().tasks.some((task) => task.halted && (!taskId || task.taskId === taskId))
}

module.exports = { AgentBreaker, agentBreaker, breakerStopWhen, stepEvents }
