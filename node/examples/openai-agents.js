'use strict'
// agentbreaker/openai-agents with the OpenAI Agents SDK: a stuck agent is nudged, then its run
// rejects with an AgentHaltedError. The model is the SDK's ScriptedModel so that this runs
// offline; leave `model` out of the Agent to use OpenAI's.
//
//   node examples/openai-agents.js

const { Agent, Runner, setTracingDisabled, tool } = require('@openai/agents')
const { ScriptedModel, functionCall, modelResponder } = require('@openai/agents/testing')
const { z } = require('zod')
const { agentBreaker } = require('agentbreaker/openai-agents')

setTracingDisabled(true)
const steps = []
for (let i = 1; i <= 20; i++) {
  steps.push(modelResponder((call) => {
    const last = call.request.input[call.request.input.length - 1]
    if (last.role === 'user' && i > 1) console.log('the model reads:', last.content)
    return [functionCall('run_tests', { cmd: 'pytest -q' }, { callId: `call_${i}` })]
  }))
}

async function main() {
  const breaker = agentBreaker()
  const runTests = tool({
    name: 'run_tests',
    description: 'Runs the test suite',
    parameters: z.object({ cmd: z.string() }),
    execute: async () => {
      throw new Error('1 failed, 41 passed in 0.52s')
    },
    errorFunction: breaker.errorFunction(),                      // records the error itself
  })
  const agent = new Agent({ name: 'coder', instructions: 'You fix tests.', model: new ScriptedModel(steps), tools: [runTests] })
  const runner = new Runner()
  breaker.attach(runner)
  try {
    await runner.run(agent, 'Fix the login test.', breaker.runOptions({ maxTurns: 30 }))
  } catch (error) {
    if (error.code !== 'HALTED') throw error
    console.log(`halted (${error.verdict.reason}) at step ${error.verdict.step}: ${error.message}`)
  }
}

main()
// the model reads: [agentbreaker] You have run `run_tests pytest -q` 3 times with the same failure. Repeating it will not change the outcome: try a different approach.
// halted (repeated_step) at step 5: the same step 5 times in a row (5 of 5): `run_tests pytest -q`
