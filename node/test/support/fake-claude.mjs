#!/usr/bin/env node
// A stand-in for the `claude` CLI the Claude Agent SDK spawns: it speaks the SDK's NDJSON
// control protocol on stdin/stdout (`--input-format stream-json --output-format stream-json`),
// enough for hooks, with a scripted "model" instead of the API. The SDK runs it with node when
// `pathToClaudeCodeExecutable` ends in .mjs.
//
// FAKE_CLAUDE_SCENARIO:
//   stuck    every turn Claude runs `pytest -q` again and it fails the same way (at most 20 turns)
//   healthy  six different tool calls that succeed, then an answer
// FAKE_CLAUDE_LOG: a file that gets one JSON line per hook answer and the context Claude read.
//
// What the fake does with the hook answers is what Claude Code documents: `permissionDecision:
// 'deny'` skips the tool (its result is the reason, is_error), `continue: false` ends the turn
// with `stopReason` as the result, `additionalContext` is read by the model (logged here).
import fs from 'node:fs'
import readline from 'node:readline'
import { randomUUID } from 'node:crypto'

const scenario = process.env.FAKE_CLAUDE_SCENARIO || 'stuck'
const logFile = process.env.FAKE_CLAUDE_LOG
const log = (entry) => logFile && fs.appendFileSync(logFile, JSON.stringify(entry) + '\n')
const session_id = '00000000-0000-4000-8000-00000000fa6e'
const model = 'claude-sonnet-4-5'
const usage = { input_tokens: 1000, output_tokens: 200, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }

const send = (message) => process.stdout.write(JSON.stringify(message) + '\n')
let hooks = {}
const pending = new Map()
let requests = 0

/** Asks the SDK to run a hook callback; resolves with its answer. */
function callback(callbackId, input, toolUseId) {
  const id = `cli_req_${++requests}`
  send({ type: 'control_request', request_id: id, request: { subtype: 'hook_callback', callback_id: callbackId, input, tool_use_id: toolUseId } })
  return new Promise((resolve) => pending.set(id, resolve))
}

async function runHooks(event, toolName, input, toolUseId) {
  const answers = []
  for (const matcher of hooks[event] || []) {
    if (matcher.matcher && matcher.matcher !== '*' && !new RegExp(`^(${matcher.matcher})$`).test(toolName)) continue
    for (const id of matcher.hookCallbackIds || []) answers.push(await callback(id, input, toolUseId))
  }
  return answers
}

const base = () => ({ session_id, transcript_path: '/tmp/fake-claude.jsonl', cwd: process.cwd(), permission_mode: 'default' })

function assistant(turn, content) {
  send({
    type: 'assistant', uuid: randomUUID(), session_id, parent_tool_use_id: null,
    message: { id: `msg_${turn}`, type: 'message', role: 'assistant', model, content, stop_reason: 'tool_use', stop_sequence: null, usage },
  })
}

function toolResult(id, content, isError) {
  send({
    type: 'user', uuid: randomUUID(), session_id, parent_tool_use_id: null,
    message: { role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content, is_error: isError }] },
  })
}

/** One tool call with its hooks: returns the stop reason when a hook stopped the session. */
async function toolCall(turn, name, input, run) {
  const id = `toolu_${turn}`
  assistant(turn, [{ type: 'text', text: scenario === 'stuck' ? 'Let me run the tests again.' : `Step ${turn}.` }, { type: 'tool_use', id, name, input }])
  let stop = null
  let denied = null
  for (const answer of await runHooks('PreToolUse', name, { ...base(), hook_event_name: 'PreToolUse', tool_name: name, tool_input: input, tool_use_id: id }, id)) {
    log({ turn, hook: 'PreToolUse', answer })
    if (answer.continue === false) stop = answer.stopReason || 'stopped by a hook'
    const specific = answer.hookSpecificOutput || {}
    if (specific.permissionDecision === 'deny') denied = specific.permissionDecisionReason || 'denied'
    if (specific.additionalContext) log({ turn, context: specific.additionalContext })
  }
  if (denied !== null) {
    toolResult(id, denied, true)
    return stop
  }
  const outcome = run()
  toolResult(id, outcome.ok ? outcome.output : outcome.error, !outcome.ok)
  const post = outcome.ok
    ? await runHooks('PostToolUse', name, { ...base(), hook_event_name: 'PostToolUse', tool_name: name, tool_input: input, tool_response: outcome.output, tool_use_id: id }, id)
    : await runHooks('PostToolUseFailure', name, { ...base(), hook_event_name: 'PostToolUseFailure', tool_name: name, tool_input: input, tool_use_id: id, error: outcome.error }, id)
  for (const answer of post) {
    log({ turn, hook: outcome.ok ? 'PostToolUse' : 'PostToolUseFailure', answer })
    if (answer.continue === false) stop = stop || answer.stopReason || 'stopped by a hook'
    const specific = answer.hookSpecificOutput || {}
    if (specific.additionalContext) log({ turn, context: specific.additionalContext })
  }
  return stop
}

async function session() {
  send({ type: 'system', subtype: 'init', session_id, uuid: randomUUID(), cwd: process.cwd(), tools: ['Bash', 'Read', 'Grep', 'Edit'],
    mcp_servers: [], model, permissionMode: 'default', slash_commands: [], output_style: 'default', skills: [], plugins: [], apiKeySource: 'none', claude_code_version: '0.0.0-fake' })
  let turns = 0
  let stop = null
  let answer = ''
  if (scenario === 'stuck') {
    for (let turn = 1; turn <= 20 && stop === null; turn++) {
      turns = turn
      stop = await toolCall(turn, 'Bash', { command: 'pytest -q' }, () => ({ ok: false, error: 'Exit code 1\n1 failed, 41 passed in 0.52s' }))
    }
  } else {
    const calls = [
      ['Grep', { pattern: 'def login' }, 'src/auth.py:12'],
      ['Read', { file_path: 'src/auth.py' }, 'def login(user): ...'],
      ['Read', { file_path: 'tests/test_auth.py' }, 'def test_login(): ...'],
      ['Edit', { file_path: 'src/auth.py', old_string: 'user', new_string: 'user, password' }, 'The file has been updated.'],
      ['Bash', { command: 'pytest -q tests/test_auth.py' }, '3 passed in 0.20s'],
      ['Bash', { command: 'git diff --stat' }, ' src/auth.py | 2 +-'],
    ]
    for (const [name, input, output] of calls) {
      turns++
      stop = await toolCall(turns, name, input, () => ({ ok: true, output }))
      if (stop !== null) break
    }
    if (stop === null) {
      answer = 'The login test passes now: login() takes the password.'
      send({ type: 'assistant', uuid: randomUUID(), session_id, parent_tool_use_id: null,
        message: { id: `msg_${turns + 1}`, type: 'message', role: 'assistant', model, content: [{ type: 'text', text: answer }], stop_reason: 'end_turn', stop_sequence: null, usage } })
    }
  }
  if (stop === null) {
    for (const reply of await runHooks('Stop', '', { ...base(), hook_event_name: 'Stop', stop_hook_active: false, last_assistant_message: answer }, undefined)) {
      log({ hook: 'Stop', answer: reply })
    }
  }
  send({ type: 'result', subtype: 'success', is_error: false, duration_ms: 5, duration_api_ms: 5, num_turns: turns,
    result: stop === null ? answer : stop, stop_reason: stop === null ? 'end_turn' : null, total_cost_usd: 0.0123 * turns, usage,
    modelUsage: { [model]: { inputTokens: 1000 * turns, outputTokens: 200 * turns, cacheReadInputTokens: 0, cacheCreationInputTokens: 0, webSearchRequests: 0, costUSD: 0.0123 * turns, contextWindow: 200000, maxOutputTokens: 32000 } },
    permission_denials: [], terminal_reason: stop === null ? 'completed' : 'hook_stopped', uuid: randomUUID(), session_id })
}

const lines = readline.createInterface({ input: process.stdin })
lines.on('line', (line) => {
  if (!line.trim()) return
  const message = JSON.parse(line)
  if (message.type === 'control_request' && message.request.subtype === 'initialize') {
    hooks = message.request.hooks || {}
    send({ type: 'control_response', response: { subtype: 'success', request_id: message.request_id, response: {
      commands: [], agents: [], output_style: 'default', available_output_styles: ['default'], models: [], account: {} } } })
  } else if (message.type === 'control_request') {
    send({ type: 'control_response', response: { subtype: 'success', request_id: message.request_id, response: {} } })
  } else if (message.type === 'control_response') {
    const resolve = pending.get(message.response.request_id)
    pending.delete(message.response.request_id)
    if (resolve) resolve(message.response.subtype === 'success' ? message.response.response || {} : { error: message.response.error })
  } else if (message.type === 'user') {
    session().catch((error) => {
      process.stderr.write(`fake claude: ${error.stack}\n`)
      process.exit(1)
    })
  }
})
lines.on('close', () => process.exit(0))
