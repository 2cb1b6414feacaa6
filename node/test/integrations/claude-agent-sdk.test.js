'use strict'
// agentbreaker/claude-agent-sdk on the real Claude Agent SDK (@anthropic-ai/claude-agent-sdk of
// the lock file): the SDK spawns test/support/fake-claude.mjs, a stand-in for the `claude` CLI
// that speaks the SDK's control protocol with a scripted model. No network, no key, no binary.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { query } = require('@anthropic-ai/claude-agent-sdk')
const { Monitor } = require('agentbreaker')
const { SpendTracker, failureText, hooks, trackSpend } = require('agentbreaker/claude-agent-sdk')

const FAKE_CLI = path.join(__dirname, '..', 'support', 'fake-claude.mjs')

/** Runs one query against the fake CLI; returns its messages and the fake's log. */
async function session(t, scenario, options = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentbreaker-claude-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  const log = path.join(dir, 'log.jsonl')
  const monitor = options.monitor || new Monitor()
  const q = query({
    prompt: 'Fix the login test.',
    options: {
      pathToClaudeCodeExecutable: FAKE_CLI,
      mcpServersDelivery: 'argv',
      cwd: dir,
      env: { ...process.env, FAKE_CLAUDE_SCENARIO: scenario, FAKE_CLAUDE_LOG: log },
      ...(options.hooks === false ? {} : { hooks: hooks(monitor) }),
    },
  })
  const messages = []
  const stream = options.spend === false ? q : trackSpend(monitor, q, { interrupt: options.interrupt && (() => q.interrupt()) })
  for await (const message of stream) messages.push(message)
  const entries = fs.existsSync(log) ? fs.readFileSync(log, 'utf8').trim().split('\n').filter(Boolean).map(JSON.parse) : []
  return { monitor, messages, entries, result: messages.find((m) => m.type === 'result') }
}

test('a stuck session is nudged (additionalContext) at step 3, then stopped (continue: false, stopReason) at step 5', async (t) => {
  const { monitor, messages, entries, result } = await session(t, 'stuck')
  const contexts = entries.filter((e) => e.context)
  assert.equal(contexts[0].turn, 3)
  assert.match(contexts[0].context, /^\[agentbreaker\] You have run `pytest -q` 3 times with the same failure/)
  const stops = entries.filter((e) => e.answer && e.answer.continue === false)
  assert.equal(stops[0].turn, 5)
  assert.match(stops[0].answer.stopReason, /^\[agentbreaker\] Run halted \(repeated_step\): the same step 5 times in a row/)
  // the session ended after the fifth turn, its result saying why
  assert.equal(result.num_turns, 5)
  assert.equal(result.terminal_reason, 'hook_stopped')
  assert.equal(result.result, stops[0].answer.stopReason)
  assert.equal(messages.filter((m) => m.type === 'assistant').length, 5)
  const task = monitor.status().tasks[0]
  assert.equal(task.halt.reason, 'repeated_step')
  assert.equal(task.toolCalls, 5)
  // the failures were recorded with their text, the exit code moved to the end
  assert.match(task.halt.message, /pytest -q/)
  assert.equal(failureText('Exit code 1\n1 failed, 41 passed'), '1 failed, 41 passed\nExit code 1')
})

test('a halted session stays halted: the next call is denied before it runs', async (t) => {
  const monitor = new Monitor()
  await session(t, 'stuck', { monitor })
  const { entries, result } = await session(t, 'stuck', { monitor })
  const first = entries.find((e) => e.hook === 'PreToolUse')
  assert.equal(first.turn, 1)
  assert.equal(first.answer.hookSpecificOutput.permissionDecision, 'deny')
  assert.match(first.answer.hookSpecificOutput.permissionDecisionReason, /^\[agentbreaker\] Not run: the run is halted \(repeated_step\)/)
  assert.equal(result.num_turns, 1)
})

test('a healthy session runs to its normal end untouched', async (t) => {
  const plain = await session(t, 'healthy', { hooks: false, spend: false })
  const guarded = await session(t, 'healthy')
  assert.ok(guarded.entries.every((e) => !e.context && JSON.stringify(e.answer) === '{}'), JSON.stringify(guarded.entries))
  assert.equal(guarded.result.terminal_reason, 'completed')
  assert.equal(guarded.result.result, 'The login test passes now: login() takes the password.')
  const shape = (r) => r.messages.map((m) => [m.type, m.subtype || null, m.type === 'assistant' ? JSON.stringify(m.message.content) : null])
  assert.deepEqual(shape(guarded), shape(plain))
  const task = guarded.monitor.status().tasks[0]
  assert.equal(task.halted, false)
  assert.equal(task.toolCalls, 6)
})

test("spend: each assistant message's usage once per id, then the result's total_cost_usd", async (t) => {
  const { monitor } = await session(t, 'healthy')
  // 7 messages of 1000 input and 200 output tokens at the default prices (0.6 cents each),
  // then the query's 7.38 cents: the table counted 4.2, the result adds the rest
  assert.equal(Math.round(monitor.status().tasks[0].spendCents * 100) / 100, 7.38)

  const tracker = new SpendTracker(new Monitor({ budget: { maxTokenSpendCentsPerTask: 1 } }))
  const message = { type: 'assistant', message: { id: 'm1', model: 'claude-sonnet-4-5', usage: { input_tokens: 1000, output_tokens: 200 } } }
  assert.equal(tracker.observe(message).action, 'continue')
  assert.equal(tracker.observe(message), null, 'the same message id counts once')
  const bigger = { type: 'assistant', message: { ...message.message, usage: { input_tokens: 1000, output_tokens: 900 } } }
  assert.equal(tracker.observe(bigger).action, 'halt', 'a larger figure counts the difference')
  assert.equal(tracker.halt.reason, 'token_spend_limit')
})

test("spend: a result's total_cost_usd is the session's running total, counted once across queries", () => {
  const monitor = new Monitor()
  const spent = () => monitor.status().tasks[0].spendCents
  const result = (session_id, total_cost_usd) => ({ type: 'result', subtype: 'success', session_id, total_cost_usd })
  new SpendTracker(monitor).observe(result('s1', 0.05)) // a tracker per query, as trackSpend makes
  assert.ok(Math.abs(spent() - 5) < 1e-9, String(spent()))
  new SpendTracker(monitor).observe(result('s1', 0.1))
  assert.ok(Math.abs(spent() - 10) < 1e-9, String(spent()))
  new SpendTracker(monitor).observe(result('s2', 0.02)) // another session: its own total
  assert.ok(Math.abs(spent() - 12) < 1e-9, String(spent()))
  new SpendTracker(monitor).observe(result('s1', 0.01)) // s1's totals were reset (/clear)
  assert.ok(Math.abs(spent() - 13) < 1e-9, String(spent()))
})

test('a halted session is denied until monitor.reset(), not after it', async () => {
  const monitor = new Monitor()
  const h = hooks(monitor)
  const [pre, failed, prompt] = ['PreToolUse', 'PostToolUseFailure', 'UserPromptSubmit'].map((event) => h[event][0].hooks[0])
  const call = { hook_event_name: 'PreToolUse', tool_name: 'Bash', tool_input: { command: 'pytest -q' } }
  let last
  for (let n = 0; n < 5; n++) {
    await pre({ ...call, tool_use_id: `t${n}` }, `t${n}`)
    last = await failed({ ...call, hook_event_name: 'PostToolUseFailure', tool_use_id: `t${n}`, error: 'Exit code 1\nFAILED' }, `t${n}`)
  }
  assert.equal(last.continue, false)
  assert.notDeepEqual(await prompt({ hook_event_name: 'UserPromptSubmit', prompt: 'go on' }), {})
  monitor.reset()
  assert.deepEqual(await prompt({ hook_event_name: 'UserPromptSubmit', prompt: 'go on' }), {})
  assert.deepEqual(await pre({ ...call, tool_input: { command: 'ls' }, tool_use_id: 't9' }, 't9'), {})
})

test('spend halt: trackSpend interrupts the query, the hooks deny the next call', async (t) => {
  const monitor = new Monitor({ budget: { maxTokenSpendCentsPerTask: 1 } })
  let interrupted = 0
  const messages = [
    { type: 'assistant', message: { id: 'a', usage: { input_tokens: 100_000, output_tokens: 0 } } },
    { type: 'assistant', message: { id: 'b', usage: { input_tokens: 100_000, output_tokens: 0 } } },
  ]
  async function* stream() {
    yield* messages
  }
  const seen = []
  for await (const m of trackSpend(monitor, stream(), { interrupt: async () => interrupted++ })) seen.push(m)
  assert.deepEqual(seen, messages)
  assert.equal(interrupted, 1)
  const pre = hooks(monitor).PreToolUse[0].hooks[0]
  const answer = await pre({ hook_event_name: 'PreToolUse', tool_name: 'Bash', tool_input: { command: 'ls' }, tool_use_id: 't1' }, 't1', { signal: new AbortController().signal })
  assert.equal(answer.continue, false)
  assert.equal(answer.hookSpecificOutput.permissionDecision, 'deny')
  assert.throws(() => hooks({}), /Monitor/)
})
