'use strict'
// agentbreaker/langchain: a Monitor on a LangChain.js v1 agent (`createAgent`), as a middleware
// with the behaviour of the Python one (agentbreaker.integrations.langchain).
//
//   const { agentBreakerMiddleware } = require('agentbreaker/langchain')
//   const agent = createAgent({ model, tools, middleware: [agentBreakerMiddleware()] })
//   const out = await agent.invoke({ messages: [{ role: 'user', content: 'Fix the login test.' }] })
//   out.agentbreaker_verdict   // null, or the run's last warn/halt verdict
//
// - afterModel: the last AIMessage is `assistant` (its text) and `usage` (usage_metadata, the
//   cache reads and writes taken out of the input tokens).
// - wrapToolCall: `tool_use` before the tool, `tool_result` after (ok unless the ToolMessage's
//   status is 'error'). A tool that throws is recorded as failed and answered with an error
//   ToolMessage, the text LangChain's ToolNode gives without middleware: with any wrapToolCall,
//   LangChain lets the tool's exception end the run, so the middleware turns it back into a
//   message the model reads. Interrupts (GraphBubbleUp), aborts and AgentHaltedErrors go on.
// - warn: the nudge is appended to the ToolMessage the model reads (a warning on a model call,
//   a spend warning, to the next tool result).
// - halt: the next beforeModel ends the run (`jumpTo: 'end'`, declared with `canJumpTo: ['end']`)
//   with an AIMessage "[agentbreaker] Run halted (reason): message"; a halt on a model call ends
//   it in afterModel, after an error ToolMessage for each pending call. A call of a halted run
//   is not run. `onHalt: 'throw'` throws the AgentHaltedError out of invoke() instead.
// Each run (invoke, stream) is its own task in the Monitor; the state's `agentbreaker_verdict`
// holds its last warn or halt verdict.

const {
  AgentHaltedError,
  Watcher,
  errorText,
  haltText,
  invalidArgument,
  makeMonitor,
  needFramework,
  newTaskId,
  skippedText,
  toText,
  usageEvent,
} = require('./_common.js')

const FRAMEWORK = 'LangChain v1 (langchain and @langchain/core)'
const langchainPath = needFramework('langchain', 'langchain', FRAMEWORK)
needFramework('langchain', '@langchain/core', FRAMEWORK)
const langchain = require(langchainPath)
const { AIMessage, ToolMessage, createMiddleware } = langchain
// zod from LangChain's own dependency (its built-in middleware declare their state with it)
const { z } = require(require.resolve('zod/v3', { paths: [langchainPath] }))

const NAME = 'AgentBreakerMiddleware'

/** An interrupt, a Command to a parent graph (LangGraph's GraphBubbleUp): not a failure. */
function isBubbleUp(error) {
  return error !== null && typeof error === 'object' && error.is_bubble_up === true
}

function isAbort(error, request) {
  const signal = request && request.runtime && request.runtime.signal
  return (signal && signal.aborted) || (error && error.name === 'AbortError')
}

function messageText(message) {
  const content = message.content
  if (typeof content === 'string') return toText(content)
  let text = ''
  try {
    text = message.text
  } catch {
    text = ''
  }
  return typeof text === 'string' && text ? toText(text) : toText(content)
}

/** A `usage` event from an AIMessage's usage_metadata (input tokens without cache reads/writes). */
function aiUsageEvent(message) {
  const meta = message.usage_metadata
  if (!meta) return null
  const details = meta.input_token_details || {}
  const cacheRead = Number(details.cache_read) || 0
  const cacheWrite = Number(details.cache_creation) || 0
  const metadata = message.response_metadata || {}
  const model = metadata.model_name || metadata.model
  return usageEvent(
    (Number(meta.input_tokens) || 0) - cacheRead - cacheWrite,
    Number(meta.output_tokens) || 0,
    cacheRead,
    cacheWrite,
    typeof model === 'string' ? model : null,
  )
}

/** The tool message with the nudges after its content (text, or a text block after the blocks). */
function withNudges(message, nudges) {
  const text = nudges.join('\n\n')
  const content = message.content
  const next =
    typeof content === 'string' ? (content ? `${content}\n\n${text}` : text) : [...content, { type: 'text', text }]
  return new ToolMessage({
    content: next,
    tool_call_id: message.tool_call_id,
    name: message.name,
    status: message.status,
    artifact: message.artifact,
    id: message.id,
  })
}

/** The error ToolMessage LangChain's ToolNode answers a throwing tool with. */
function errorMessage(error, call) {
  const invalidInput = langchain.ToolInvocationError && langchain.ToolInvocationError.isInstance(error)
  return new ToolMessage({
    content: invalidInput ? error.message : `${error}\n Please fix your mistakes.`,
    tool_call_id: call.id || '',
    name: call.name,
    status: 'error',
  })
}

/**
 * The middleware (see the file's head). Options: `monitor` (else a new one from the Monitor's
 * settings: `profile`, `toolLimits`, `warnBefore`, ...), `onHalt` ('end', the default, or
 * 'throw'), `toolErrors` ('message', the default: a throwing tool answers with an error
 * ToolMessage; 'throw': the exception ends the run, as LangChain does with a wrapToolCall).
 */
function agentBreakerMiddleware(options = {}) {
  if (options === null || typeof options !== 'object') {
    throw invalidArgument('agentBreakerMiddleware() takes an options object')
  }
  const { onHalt = 'end', toolErrors = 'message' } = options
  if (onHalt !== 'end' && onHalt !== 'throw') throw invalidArgument(`onHalt must be 'end' or 'throw', not ${onHalt}`)
  if (toolErrors !== 'message' && toolErrors !== 'throw') {
    throw invalidArgument(`toolErrors must be 'message' or 'throw', not ${toolErrors}`)
  }
  const watcher = new Watcher(makeMonitor(options))
  // Runs whose state carries no task (a thread resumed from a checkpoint written before this
  // middleware was added) share this one.
  const fallbackTask = newTaskId('langchain')

  const runOf = (state) => {
    const task = state && typeof state.agentbreaker_task === 'string' ? state.agentbreaker_task : null
    return watcher.run(task || fallbackTask)
  }

  const verdictUpdate = (run) => {
    if (!run.dirty) return undefined
    run.dirty = false
    return { agentbreaker_verdict: run.latest }
  }

  /** Ends the run: error messages for the pending calls, the reason, the verdict in the state. */
  const halt = (run, pending) => {
    const verdict = run.halt
    if (onHalt === 'throw') {
      watcher.close(run.task)
      throw new AgentHaltedError(verdict)
    }
    // `jumpTo: 'end'` ends the graph without afterAgent: the run's task is closed here
    watcher.close(run.task)
    run.dirty = false
    const closing = []
    for (const call of pending) {
      if (call && call.id) {
        closing.push(new ToolMessage({ content: skippedText(verdict), tool_call_id: call.id, name: call.name, status: 'error' }))
      }
    }
    closing.push(new AIMessage({ content: haltText(verdict) }))
    return { jumpTo: 'end', messages: closing, agentbreaker_verdict: verdict }
  }

  const answer = (run, message) => {
    const nudges = watcher.takeNudges(run)
    return nudges.length > 0 ? withNudges(message, nudges) : message
  }

  const middleware = createMiddleware({
    name: NAME,
    stateSchema: z.object({
      agentbreaker_task: z.string().optional(),
      agentbreaker_verdict: z.any().optional(),
    }),
    beforeAgent: () => {
      const task = newTaskId('langchain')
      watcher.run(task)
      return { agentbreaker_task: task, agentbreaker_verdict: null }
    },
    beforeModel: {
      canJumpTo: ['end'],
      hook: (state) => {
        const run = runOf(state)
        if (run.halt !== null) return halt(run, [])
        return verdictUpdate(run)
      },
    },
    afterModel: {
      canJumpTo: ['end'],
      hook: (state) => {
        const messages = (state && state.messages) || []
        const message = messages[messages.length - 1]
        if (!message || !AIMessage.isInstance(message)) return undefined
        const run = runOf(state)
        watcher.observe(run, { type: 'assistant', text: messageText(message) })
        const usage = aiUsageEvent(message)
        if (usage !== null) watcher.observe(run, usage)
        if (run.halt !== null) return halt(run, message.tool_calls || [])
        return verdictUpdate(run)
      },
    },
    afterAgent: (state) => {
      const run = watcher.close((state && state.agentbreaker_task) || fallbackTask)
      if (run === undefined || !run.dirty) return undefined
      if (run.halt !== null && onHalt === 'throw') throw new AgentHaltedError(run.halt)
      return { agentbreaker_verdict: run.latest }
    },
    wrapToolCall: async (request, handler) => {
      const run = runOf(request.state)
      const call = request.toolCall || {}
      const use = { type: 'tool_use', name: call.name || '?', input: call.args ?? null }
      if (call.id) use.id = call.id
      watcher.observe(run, use)
      if (run.halt !== null) {
        return new ToolMessage({ content: skippedText(run.halt), tool_call_id: call.id || '', name: call.name, status: 'error' })
      }
      const result = { type: 'tool_result', name: call.name || '?' }
      if (call.id) result.id = call.id
      let response
      try {
        response = await handler(request)
      } catch (error) {
        if (isBubbleUp(error) || isAbort(error, request) || error instanceof AgentHaltedError) throw error
        watcher.observe(run, { ...result, ok: false, text: errorText(error) })
        if (toolErrors === 'throw') throw error
        return answer(run, errorMessage(error, call))
      }
      if (ToolMessage.isInstance(response)) {
        watcher.observe(run, { ...result, ok: response.status !== 'error', text: messageText(response) })
        return answer(run, response)
      }
      // a Command: the tool changed the graph's state; its tool messages are its result
      const update = response && response.update
      const found = update && Array.isArray(update.messages) ? update.messages : []
      const texts = found.filter((m) => ToolMessage.isInstance(m)).map(messageText)
      watcher.observe(run, { ...result, ok: true, text: texts.join('\n') })
      return response
    },
  })
  Object.defineProperty(middleware, 'monitor', { value: watcher.monitor, enumerable: false })
  Object.defineProperty(middleware, 'lastVerdict', { get: () => watcher.lastVerdict, enumerable: false })
  return middleware
}

module.exports = { agentBreakerMiddleware }
