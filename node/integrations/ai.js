'use strict'
// agentbreaker/ai: a Monitor on the Vercel AI SDK's agent loop (`ai` 5, 6 and 7).
//
//   const { agentBreaker } = require('agentbreaker/ai')
//   const guard = agentBreaker()
//   const result = await generateText({ model, tools, prompt, ...guard })
//   guard.verdict   // null, or the last warn/halt verdict (a halted run ends with its halt)
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
// Nothing of `ai` is loaded: the adapter only reads what the SDK hands it.

const {
  AgentHaltedError,
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
    const state = {
      watcher,
      fixedTask: typeof taskId === 'string' && taskId ? taskId : null,
      run: null,
    }
    state.run = watcher.run(state.fixedTask || newTaskId('ai'))
    Object.defineProperty(this, '_state', { value: state })

    const onStep = async (step) => {
      const run = state.run
      for (const event of stepEvents(step)) watcher.observe(run, event)
      await callMaybe(userStepCallback, step)
    }
    const limit = maxSteps === null ? Infinity : maxSteps

    /**
     * A StopCondition: the Monitor halted the run (with onHalt 'throw': throws the
     * AgentHaltedError), maxSteps is reached, or one of yours is true.
     */
    this.stopWhen = async (arg) => {
      if (state.run.halt !== null) {
        if (onHalt === 'throw') throw new AgentHaltedError(state.run.halt)
        return true
      }
      const steps = arg && Array.isArray(arg.steps) ? arg.steps : []
      if (steps.length >= limit) return true
      for (const condition of conditions) {
        if (await condition(arg)) return true
      }
      return false
    }
    /** Adds the nudges of the warnings since the last step to this step's messages. */
    this.prepareStep = async (arg) => {
      const result = await callMaybe(userPrepare, arg)
      const nudges = watcher.takeNudges(state.run)
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

  /** The run's task id in the Monitor. */
  get taskId() {
    return this._state.run.task
  }

  /** The run's last warn or halt verdict (null while it is healthy); a halted run ends with its halt. */
  get verdict() {
    return this._state.run.latest
  }

  /** The halt verdict, once the Monitor halted the run (else null). */
  get halt() {
    return this._state.run.halt
  }

  get halted() {
    return this._state.run.halt !== null
  }

  /** Ends the run (its task in the Monitor is closed) and starts a new one: the next call starts from zero. */
  reset() {
    const state = this._state
    state.watcher.close(state.run.task)
    state.run = state.watcher.run(state.fixedTask || newTaskId('ai'))
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
