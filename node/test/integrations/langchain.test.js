'use strict'
// agentbreaker/langchain on the real LangChain.js v1 (langchain and @langchain/core of the lock
// file), with its own test double (fakeModel() from @langchain/core/testing): no network, no key.

const test = require('node:test')
const assert = require('node:assert/strict')
const { AIMessage, createAgent, tool } = require('langchain')
const { fakeModel } = require('@langchain/core/testing')
const { z } = require('zod')
const { AgentHaltedError } = require('agentbreaker')
const { agentBreakerMiddleware } = require('agentbreaker/langchain')

const usage = (input = 10, output = 5) => ({ input_tokens: input, output_tokens: output, total_tokens: input + output })

/** A model whose every turn is the same `run_tests` call (at most 20 turns). */
function stuckModel(tokens = usage()) {
  const model = fakeModel()
  let k = 0
  for (let i = 0; i < 20; i++) {
    model.respond(() => {
      k++
      return new AIMessage({
        content: 'Let me run the tests again.',
        id: `ai_${k}`,
        tool_calls: [{ id: `call_${k}`, name: 'run_tests', args: { cmd: 'pytest -q' }, type: 'tool_call' }],
        usage_metadata: tokens,
      })
    })
  }
  return model
}

function stuckTool() {
  const calls = { n: 0 }
  const runTests = tool(
    async () => {
      calls.n++
      throw new Error('1 failed, 41 passed in 0.52s')
    },
    { name: 'run_tests', description: 'Runs the tests', schema: z.object({ cmd: z.string() }) },
  )
  return { runTests, calls }
}

function healthyModel() {
  const model = fakeModel()
  const calls = [
    ['grep', { arg: 'def login' }],
    ['read', { arg: 'src/auth.py' }],
    ['read', { arg: 'tests/test_auth.py' }],
    ['edit', { arg: 'src/auth.py' }],
    ['test', { arg: 'tests/test_auth.py' }],
    ['diff', { arg: '--stat' }],
  ]
  calls.forEach(([name, args], i) => {
    model.respond(new AIMessage({ content: `Step ${i}.`, id: `h_${i}`, tool_calls: [{ id: `h_${i}`, name, args, type: 'tool_call' }], usage_metadata: usage() }))
  })
  model.respond(new AIMessage({ content: 'The login test passes now.', id: 'h_end', usage_metadata: usage() }))
  return model
}

function healthyTools() {
  return ['grep', 'read', 'edit', 'test', 'diff'].map((name) =>
    tool(async ({ arg }) => `${name} ok (${arg})`, { name, description: name, schema: z.object({ arg: z.string() }) }),
  )
}

const INPUT = { messages: [{ role: 'user', content: 'Fix the login test.' }] }
const NUDGE = '[agentbreaker] You have run `run_tests pytest -q` 3 times'

function lastToolText(call) {
  const tools = call.messages.filter((m) => m.type === 'tool')
  return tools.length ? String(tools[tools.length - 1].content) : ''
}

function assertStuck(out, model, calls) {
  assert.equal(model.callCount, 5, 'five model calls, none after the halt')
  assert.equal(calls.n, 5)
  // warned after the third identical failing step: the fourth call reads the nudge in the tool result
  assert.ok(lastToolText(model.calls[3]).includes(NUDGE), lastToolText(model.calls[3]))
  for (const i of [1, 2, 4]) assert.ok(!lastToolText(model.calls[i]).includes('[agentbreaker]'))
  const types = out.messages.map((m) => m.type)
  assert.deepEqual(types, ['human', 'ai', 'tool', 'ai', 'tool', 'ai', 'tool', 'ai', 'tool', 'ai', 'tool', 'ai'])
  const last = out.messages[out.messages.length - 1]
  assert.match(String(last.content), /^\[agentbreaker\] Run halted \(repeated_step\): the same step 5 times in a row/)
  for (const m of out.messages.filter((m) => m.type === 'tool')) {
    assert.equal(m.status, 'error')
    assert.match(String(m.content), /^Error: 1 failed, 41 passed in 0\.52s\n Please fix your mistakes\./)
  }
  assert.equal(out.agentbreaker_verdict.action, 'halt')
  assert.equal(out.agentbreaker_verdict.reason, 'repeated_step')
}

test('a stuck agent is nudged in the tool result at step 3 and ended (jumpTo end) at step 5; its tool errors never crash the run', async () => {
  const { runTests, calls } = stuckTool()
  const model = stuckModel()
  const middleware = agentBreakerMiddleware()
  const agent = createAgent({ model, tools: [runTests], middleware: [middleware] })
  const out = await agent.invoke(INPUT, { recursionLimit: 100 })
  assertStuck(out, model, calls)
  assert.equal(middleware.lastVerdict, out.agentbreaker_verdict)
  assert.deepEqual(middleware.monitor.status().tasks, [], 'the run closed its task')
})

test('streaming: agent.stream() ends the same way', async () => {
  const { runTests, calls } = stuckTool()
  const model = stuckModel()
  const agent = createAgent({ model, tools: [runTests], middleware: [agentBreakerMiddleware()] })
  let last
  for await (const chunk of await agent.stream(INPUT, { streamMode: 'values', recursionLimit: 100 })) last = chunk
  assertStuck(last, model, calls)
})

test("onHalt: 'throw': invoke() rejects with the AgentHaltedError", async () => {
  const { runTests, calls } = stuckTool()
  const model = stuckModel()
  const agent = createAgent({ model, tools: [runTests], middleware: [agentBreakerMiddleware({ onHalt: 'throw' })] })
  await assert.rejects(agent.invoke(INPUT, { recursionLimit: 100 }), (error) => {
    assert.ok(error instanceof AgentHaltedError, String(error))
    assert.equal(error.code, 'HALTED')
    assert.equal(error.verdict.reason, 'repeated_step')
    return true
  })
  assert.equal(model.callCount, 5)
  assert.equal(calls.n, 5)
})

test('a healthy agent runs to its normal end, exactly as without the middleware', async () => {
  const outputs = []
  for (const guarded of [false, true]) {
    const model = healthyModel()
    const middleware = guarded ? [agentBreakerMiddleware()] : []
    const out = await createAgent({ model, tools: healthyTools(), middleware }).invoke(INPUT, { recursionLimit: 100 })
    assert.equal(model.callCount, 7)
    if (guarded) assert.equal(out.agentbreaker_verdict, null)
    outputs.push(out.messages.map((m) => [m.type, m.content, m.type === 'tool' ? m.status : null]))
  }
  assert.deepEqual(outputs[1], outputs[0])
  assert.equal(outputs[1].at(-1)[1], 'The login test passes now.')
})

test("toolErrors: 'throw' lets the tool's exception end the run (recorded as a failed call first)", async () => {
  const { runTests } = stuckTool()
  const middleware = agentBreakerMiddleware({ toolErrors: 'throw' })
  const agent = createAgent({ model: stuckModel(), tools: [runTests], middleware: [middleware] })
  await assert.rejects(agent.invoke(INPUT), /1 failed, 41 passed/)
  const task = middleware.monitor.status().tasks[0]
  assert.equal(task.toolCalls, 1)
  assert.equal(task.rules.fail_streak.count, 1)
})

test('a spend halt on a model call ends the run in afterModel: pending calls answered, never run', async () => {
  const { runTests, calls } = stuckTool()
  const model = stuckModel(usage(100_000, 1000))
  const agent = createAgent({ model, tools: [runTests], middleware: [agentBreakerMiddleware({ budget: { maxTokenSpendCentsPerTask: 1 } })] })
  const out = await agent.invoke(INPUT, { recursionLimit: 100 })
  assert.equal(model.callCount, 1)
  assert.equal(calls.n, 0)
  assert.deepEqual(out.messages.map((m) => m.type), ['human', 'ai', 'tool', 'ai'])
  assert.match(String(out.messages[2].content), /^\[agentbreaker\] Not run: the run is halted \(token_spend_limit\)/)
  assert.equal(out.agentbreaker_verdict.reason, 'token_spend_limit')
})

test('concurrent runs of one agent are separate tasks', async () => {
  const { runTests, calls } = stuckTool()
  const middleware = agentBreakerMiddleware()
  const stuck = createAgent({ model: stuckModel(), tools: [runTests], middleware: [middleware] })
  const fine = createAgent({ model: healthyModel(), tools: healthyTools(), middleware: [middleware] })
  const [a, b] = await Promise.all([stuck.invoke(INPUT, { recursionLimit: 100 }), fine.invoke(INPUT, { recursionLimit: 100 })])
  assert.equal(a.agentbreaker_verdict.reason, 'repeated_step')
  assert.equal(calls.n, 5)
  assert.equal(b.agentbreaker_verdict, null)
  assert.notEqual(a.agentbreaker_task, b.agentbreaker_task)
})
