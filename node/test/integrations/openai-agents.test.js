'use strict'
// agentbreaker/openai-agents on the real OpenAI Agents SDK (@openai/agents of the lock file),
// with its own test double (ScriptedModel from @openai/agents/testing): no network, no key.

const test = require('node:test')
const assert = require('node:assert/strict')
const { Agent, Runner, ToolCallError, Usage, setTracingDisabled, tool } = require('@openai/agents')
const { ScriptedModel, assistantMessage, functionCall, modelResponder } = require('@openai/agents/testing')
const { z } = require('zod')
const { AgentHaltedError, Monitor } = require('agentbreaker')
const { SDK_TOOL_ERROR, agentBreaker } = require('agentbreaker/openai-agents')

setTracingDisabled(true)

const usage = (input = 10, output = 5) => new Usage({ requests: 1, input_tokens: input, output_tokens: output, total_tokens: input + output })

/** A model whose every turn is the same failing `run_tests` call (at most 20 turns). */
function stuckModel(tokens = usage()) {
  const steps = []
  for (let i = 1; i <= 20; i++) {
    steps.push(modelResponder(() => ({
      usage: tokens,
      output: [assistantMessage('Let me run the tests again.'), functionCall('run_tests', { cmd: 'pytest -q' }, { callId: `call_${i}` })],
    })))
  }
  return new ScriptedModel(steps)
}

function stuckTool(breaker, options = {}) {
  const calls = { n: 0 }
  const runTests = tool({
    name: 'run_tests',
    description: 'Runs the tests',
    parameters: z.object({ cmd: z.string() }),
    execute: async () => {
      calls.n++
      throw new Error('1 failed, 41 passed in 0.52s')
    },
    ...(options.errorFunction === false ? {} : { errorFunction: breaker.errorFunction() }),
  })
  return { runTests, calls }
}

/** Six different calls that succeed, then an answer. */
function healthyModel() {
  const calls = [
    ['grep', { arg: 'def login' }],
    ['read', { arg: 'src/auth.py' }],
    ['read', { arg: 'tests/test_auth.py' }],
    ['edit', { arg: 'src/auth.py' }],
    ['test', { arg: 'tests/test_auth.py' }],
    ['diff', { arg: '--stat' }],
  ]
  const steps = calls.map(([name, args], i) => modelResponder(() => ({ usage: usage(), output: [functionCall(name, args, { callId: `h_${i}` })] })))
  steps.push(modelResponder(() => ({ usage: usage(), output: [assistantMessage('The login test passes now.')] })))
  return new ScriptedModel(steps)
}

function healthyTools() {
  return ['grep', 'read', 'edit', 'test', 'diff'].map((name) =>
    tool({ name, description: name, parameters: z.object({ arg: z.string() }), execute: async ({ arg }) => `${name} ok (${arg})` }),
  )
}

function lastInput(call) {
  const input = call.request.input
  return typeof input === 'string' ? input : JSON.stringify(input[input.length - 1])
}

const NUDGE = '[agentbreaker] You have run `run_tests pytest -q` 3 times'

async function rejection(promise) {
  try {
    await promise
  } catch (error) {
    return error
  }
  assert.fail('the run did not reject')
}

function assertStuck(model, calls, error, breaker) {
  assert.equal(model.calls.length, 5, 'five model calls, none after the halt')
  assert.equal(calls.n, 5)
  assert.ok(lastInput(model.calls[3]).includes(NUDGE), lastInput(model.calls[3]))
  for (const i of [0, 1, 2, 4]) assert.ok(!lastInput(model.calls[i]).includes('[agentbreaker]'))
  assert.ok(error instanceof AgentHaltedError, String(error))
  assert.equal(error.code, 'HALTED')
  assert.equal(error.verdict.reason, 'repeated_step')
  assert.equal(error.verdict.step, 5)
  assert.equal(breaker.halt, error.verdict)
}

test('Runner: a stuck agent is nudged at step 3, then the run rejects with the AgentHaltedError at step 5', async () => {
  const breaker = agentBreaker()
  const { runTests, calls } = stuckTool(breaker)
  const model = stuckModel()
  const agent = new Agent({ name: 'coder', instructions: 'You fix tests.', model, tools: [runTests] })
  const runner = new Runner()
  breaker.attach(runner)
  const failures = []
  breaker.monitor.on('verdict', (v) => failures.push(v.message))
  const error = await rejection(runner.run(agent, 'Fix the login test.', breaker.runOptions({ maxTurns: 30 })))
  assertStuck(model, calls, error, breaker)
  // errorFunction() recorded the error itself (the model read the SDK's text)
  assert.ok(failures.some((m) => m.includes('Error: 1 failed, 41 passed')), failures.join('\n'))
  assert.ok(lastInput(model.calls[1]).includes(SDK_TOOL_ERROR))
})

test("Agent hooks, and a tool without our errorFunction: the SDK's fixed error text counts as a failure", async () => {
  const breaker = agentBreaker()
  const { runTests, calls } = stuckTool(breaker, { errorFunction: false })
  const model = stuckModel()
  const agent = new Agent({ name: 'coder', model, tools: [runTests] })
  breaker.attach(agent)
  const error = await rejection(new Runner().run(agent, 'Fix the login test.', breaker.runOptions()))
  assertStuck(model, calls, error, breaker)
  const task = breaker.monitor.status().tasks.find((t) => t.halted)
  assert.equal(task.rules.fail_streak.count, 5)
})

test('streaming: the halted run ends cancelled, the verdict on the breaker', async () => {
  const breaker = agentBreaker()
  const { runTests, calls } = stuckTool(breaker)
  const model = stuckModel()
  const agent = new Agent({ name: 'coder', model, tools: [runTests] })
  const runner = new Runner()
  breaker.attach(runner)
  const result = await runner.run(agent, 'Fix the login test.', breaker.runOptions({ stream: true, maxTurns: 30 }))
  for await (const _ of result);
  await result.completed
  assert.equal(result.cancelled, true)
  assert.equal(model.calls.length, 5)
  assert.equal(model.calls[0].streamed, true)
  assert.equal(calls.n, 5)
  assert.ok(lastInput(model.calls[3]).includes(NUDGE))
  assert.equal(breaker.halt.reason, 'repeated_step')
})

test('a healthy agent runs to its normal end, exactly as without the breaker; its task is closed', async () => {
  const outputs = []
  for (const guarded of [false, true]) {
    const breaker = agentBreaker()
    const model = healthyModel()
    const agent = new Agent({ name: 'coder', model, tools: healthyTools() })
    const runner = new Runner()
    if (guarded) breaker.attach(runner)
    const result = await runner.run(agent, 'Fix the login test.', guarded ? breaker.runOptions({ maxTurns: 30 }) : { maxTurns: 30 })
    assert.equal(model.calls.length, 7)
    assert.ok(model.calls.every((c) => !JSON.stringify(c.request.input).includes('[agentbreaker]')))
    if (guarded) {
      assert.equal(breaker.verdict, null)
      assert.deepEqual(breaker.monitor.status().tasks, [], 'the run closed its task')
    }
    outputs.push([result.finalOutput, result.newItems.map((i) => i.type)])
  }
  assert.deepEqual(outputs[1], outputs[0])
  assert.equal(outputs[1][0], 'The login test passes now.')
})

test('a run resumed after an approval is watched with its own signal: nudged, then halted after its fifth failing call', async () => {
  const breaker = agentBreaker()
  const { runTests, calls } = stuckTool(breaker)
  const deploy = tool({ name: 'deploy', description: 'Deploys', parameters: z.object({}), needsApproval: true, execute: async () => 'deployed' })
  const scripted = new ScriptedModel([
    modelResponder(() => ({ usage: usage(), output: [functionCall('deploy', {}, { callId: 'deploy_1' })] })),
    ...Array.from({ length: 20 }, (_, i) => modelResponder(() => ({
      usage: usage(),
      output: [assistantMessage('Let me run the tests again.'), functionCall('run_tests', { cmd: 'pytest -q' }, { callId: `call_${i}` })],
    }))),
  ])
  const agent = new Agent({ name: 'coder', model: scripted, tools: [deploy, runTests] })
  const runner = new Runner()
  breaker.attach(runner)
  const first = await runner.run(agent, 'Deploy, then fix the tests.', breaker.runOptions({ maxTurns: 30 }))
  assert.equal(first.interruptions.length, 1)
  first.state.approve(first.interruptions[0])
  const error = await rejection(runner.run(agent, first.state, breaker.runOptions({ maxTurns: 30 })))
  assert.ok(error instanceof AgentHaltedError, String(error))
  assert.equal(error.verdict.reason, 'repeated_step')
  assert.equal(calls.n, 5, 'the failing call ran five times, none after the halt')
  assert.ok(scripted.calls.some((call) => lastInput(call).includes(NUDGE)), 'the resumed run read the nudge')
})

test('with a fixed taskId, every run starts from zero: after a max-turns end and after a halt', async () => {
  const breaker = agentBreaker({ taskId: 'job' })
  const runner = new Runner()
  breaker.attach(runner)
  const cut = stuckTool(breaker)
  const ended = await rejection(runner.run(new Agent({ name: 'coder', model: stuckModel(), tools: [cut.runTests] }), 'Fix.', breaker.runOptions({ maxTurns: 2 })))
  assert.equal(ended.constructor.name, 'MaxTurnsExceededError')
  const { runTests, calls } = stuckTool(breaker)
  const model = stuckModel()
  const error = await rejection(runner.run(new Agent({ name: 'coder', model, tools: [runTests] }), 'Fix.', breaker.runOptions({ maxTurns: 30 })))
  assertStuck(model, calls, error, breaker)
  const result = await runner.run(new Agent({ name: 'coder', model: healthyModel(), tools: healthyTools() }), 'Fix.', breaker.runOptions({ maxTurns: 30 }))
  assert.equal(result.finalOutput, 'The login test passes now.')
})

test('concurrent runs on one runner are separate tasks; your signal and input filter are kept', async () => {
  const breaker = agentBreaker()
  const runner = new Runner()
  breaker.attach(runner)
  const { runTests, calls } = stuckTool(breaker)
  const stuck = stuckModel()
  const healthy = healthyModel()
  const filtered = []
  const mine = new AbortController()
  const [stuckRun, healthyRun] = await Promise.allSettled([
    runner.run(new Agent({ name: 'stuck', model: stuck, tools: [runTests] }), 'x', breaker.runOptions({ maxTurns: 30 })),
    runner.run(new Agent({ name: 'healthy', model: healthy, tools: healthyTools() }), 'y', breaker.runOptions({
      maxTurns: 30,
      signal: mine.signal,
      context: { user: 'me' },
      callModelInputFilter: ({ modelData, context }) => {
        filtered.push(context.user)
        return modelData
      },
    })),
  ])
  assert.equal(stuckRun.status, 'rejected')
  assert.equal(stuckRun.reason.verdict.reason, 'repeated_step')
  assert.equal(calls.n, 5)
  assert.equal(healthyRun.status, 'fulfilled')
  assert.equal(healthyRun.value.finalOutput, 'The login test passes now.')
  assert.equal(filtered.length, 7)
  assert.ok(filtered.every((u) => u === 'me'))
  // your own signal still aborts the run
  const ac = new AbortController()
  ac.abort(new Error('mine'))
  const error = await rejection(runner.run(new Agent({ name: 'h', model: healthyModel(), tools: healthyTools() }), 'z', breaker.runOptions({ signal: ac.signal })))
  assert.ok(!(error instanceof AgentHaltedError))
  assert.match(error.message, /abort|mine/)
})

test('spend: the run context usage counts against the budget; a run without runOptions() rejects with ToolCallError', async () => {
  const monitor = new Monitor({ budget: { maxTokenSpendCentsPerTask: 1 } })
  const breaker = agentBreaker({ monitor })
  const { runTests } = stuckTool(breaker)
  const model = stuckModel(usage(100_000, 1000))
  const runner = new Runner()
  breaker.attach(runner)
  const error = await rejection(runner.run(new Agent({ name: 'c', model, tools: [runTests] }), 'x'))
  assert.ok(error instanceof ToolCallError, String(error))
  assert.ok(error.error instanceof AgentHaltedError)
  assert.equal(error.error.verdict.reason, 'token_spend_limit')
  assert.equal(model.calls.length, 1)
  breaker.detach(runner)
  assert.throws(() => agentBreaker({ monitor, profile: 'seed' }), /either monitor or/)
})
